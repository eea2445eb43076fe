package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"poolfs/internal/client"
	"poolfs/internal/cluster"
	"poolfs/internal/meta"
)

func putCmd(g *globals) *cobra.Command {
	var quiet bool
	cmd := &cobra.Command{
		Use:   "put LOCAL PATH",
		Short: "Store a local file (- for stdin) as PATH, or into PATH if it is a directory, atomically replacing it",
		Long: `Store a local file (- for stdin) in the cluster, as cp does: as PATH, or as
PATH/NAME (NAME: the local file's name) when PATH is a directory or ends in /.
The target is checked before anything is sent: its directory must exist. Readers
see the old content (or no file) until put returns, then the new content.

` + pathRule,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return g.withConn(cmd, func(conn *cluster.Conn) error {
				var r io.Reader = os.Stdin
				size := int64(-1)
				if args[0] != "-" {
					f, err := os.Open(args[0])
					if err != nil {
						return err
					}
					defer f.Close()
					st, err := f.Stat()
					if err != nil {
						return err
					}
					if st.IsDir() {
						return &pathErr{op: "store", paths: []string{args[0]}, err: meta.ErrIsDir}
					}
					if st.Mode().IsRegular() {
						size = st.Size()
					}
					r = f
				}
				p, err := g.paths(conn).path(ctx, args[1])
				if err != nil {
					return err
				}
				shown, p, err := putTarget(ctx, conn.Client, args[0], args[1], p)
				if err != nil {
					return err
				}
				bar := newBar(size, "put "+shown, quiet)
				start := time.Now()
				a, err := conn.Client.Put(ctx, p, r, client.PutOptions{Size: size, Progress: bar.set})
				bar.finish()
				if err != nil {
					return failed("store", err, shown)
				}
				if !quiet {
					fmt.Fprintf(os.Stderr, "%s: %s in %s (%s)\n", shown, human(int64(a.Size)),
						time.Since(start).Round(time.Millisecond), rate(int64(a.Size), time.Since(start)))
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "no progress bar or summary")
	return cmd
}

// putTarget decides where `put LOCAL ARG` stores, as cp does, before any
// byte is sent: p (ARG as a cluster path) itself, or p/NAME when p is a
// directory or ends in / (NAME: LOCAL's base name). It returns the target
// as the user would name it (for messages) and as a cluster path.
func putTarget(ctx context.Context, c *client.Client, local, arg, p string) (shown, target string, err error) {
	intoDir := strings.HasSuffix(p, "/")
	p = path.Clean(p)
	a, err := c.Resolve(ctx, p)
	switch {
	case err == nil && a.Type == meta.TypeDir:
		if local == "-" {
			return "", "", &pathErr{op: "store stdin as", paths: []string{arg}, err: meta.ErrIsDir,
				hint: fmt.Sprintf("Name the file: try 'poolfs put - %s'.", path.Join(arg, "NAME"))}
		}
		name := filepath.Base(local)
		shown, target = path.Join(arg, name), path.Join(p, name)
		if b, err := c.Resolve(ctx, target); err == nil && b.Type == meta.TypeDir {
			return "", "", &pathErr{op: "overwrite directory", paths: []string{shown}, err: meta.ErrIsDir}
		}
		return shown, target, nil
	case err == nil:
		if intoDir {
			return "", "", &pathErr{op: "store into", paths: []string{arg}, err: meta.ErrNotDir}
		}
		return arg, p, nil
	case !errors.Is(err, meta.ErrNotFound):
		return "", "", failed("stat", err, arg)
	}
	parent := path.Dir(strings.TrimSuffix(arg, "/"))
	mkdirHint := fmt.Sprintf("Try 'poolfs mkdir -p %s' first.", parent)
	if intoDir {
		return "", "", &pathErr{op: "store into", paths: []string{arg}, err: meta.ErrNotFound,
			hint: fmt.Sprintf("Try 'poolfs mkdir -p %s' first.", arg)}
	}
	d, err := c.Resolve(ctx, path.Dir(p))
	switch {
	case errors.Is(err, meta.ErrNotFound):
		return "", "", &pathErr{op: "create", paths: []string{arg}, err: meta.ErrNotFound, hint: mkdirHint}
	case err != nil:
		return "", "", failed("stat", err, parent)
	case d.Type != meta.TypeDir:
		return "", "", &pathErr{op: "create", paths: []string{arg}, err: meta.ErrNotDir}
	}
	return arg, p, nil
}

func getCmd(g *globals) *cobra.Command {
	var quiet bool
	cmd := &cobra.Command{
		Use:   "get PATH LOCAL",
		Short: "Copy PATH to a local file (- for stdout), or into LOCAL if it is a directory",
		Long: `Copy a file of the cluster to LOCAL (- for stdout), or to LOCAL/NAME when LOCAL
is a directory, as cp does. The bytes go to a hidden temporary file next to the
target, renamed over it at the end: a get that fails leaves the target as it was
(a device or FIFO given as LOCAL is written in place).

` + pathRule,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return g.withConn(cmd, func(conn *cluster.Conn) error {
				p, a, err := g.paths(conn).resolve(ctx, args[0])
				if err != nil {
					return err
				}
				if a.Type == meta.TypeDir {
					return &pathErr{op: "copy", paths: []string{args[0]}, err: meta.ErrIsDir}
				}
				var w io.Writer = os.Stdout
				var out *localTarget
				if args[1] != "-" {
					if out, err = createLocal(args[1], path.Base(p)); err != nil {
						return err
					}
					defer out.abort()
					w = out.f
				}
				bar := newBar(int64(a.Size), "get "+args[0], quiet)
				start := time.Now()
				_, err = conn.Client.Get(ctx, p, w, client.GetOptions{Progress: bar.set})
				bar.finish()
				if err != nil {
					return failed("copy", err, args[0])
				}
				if out != nil {
					if err := out.commit(); err != nil {
						return err
					}
				}
				if !quiet {
					fmt.Fprintf(os.Stderr, "%s: %s in %s (%s)\n", args[0], human(int64(a.Size)),
						time.Since(start).Round(time.Millisecond), rate(int64(a.Size), time.Since(start)))
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "no progress bar or summary")
	return cmd
}

// getTmpPrefix names the hidden files get writes before renaming them over
// their target.
const getTmpPrefix = ".poolfs-get."

// localTarget is the local file a get writes: a temporary renamed over
// the target by commit, or, for a target that is not a regular file (a
// device, a FIFO), the target itself.
type localTarget struct {
	f          *os.File
	tmp, final string // tmp is "" when writing the target in place
	mode       os.FileMode
	done       bool
}

// createLocal opens the target of `get PATH dst` (dst/name when dst is a
// directory) for writing, leaving any existing target untouched.
func createLocal(dst, name string) (*localTarget, error) {
	st, err := os.Stat(dst)
	if err == nil && st.IsDir() {
		dst = filepath.Join(dst, name)
		st, err = os.Stat(dst)
	} else if errors.Is(err, os.ErrNotExist) && strings.HasSuffix(dst, "/") {
		return nil, &pathErr{op: "create regular file", paths: []string{dst}, err: meta.ErrNotDir}
	}
	switch {
	case err == nil && st.IsDir():
		return nil, &pathErr{op: "overwrite directory", paths: []string{dst}, err: meta.ErrIsDir}
	case err == nil && !st.Mode().IsRegular():
		f, err := os.OpenFile(dst, os.O_WRONLY|os.O_TRUNC, 0)
		if err != nil {
			return nil, failed("open", err, dst)
		}
		return &localTarget{f: f, final: dst}, nil
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return nil, failed("stat", err, dst)
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	base := getTmpPrefix + hex.EncodeToString(rnd[:]) + "." + filepath.Base(dst)
	if len(base) > 255 {
		base = base[:255]
	}
	t := &localTarget{tmp: filepath.Join(filepath.Dir(dst), base), final: dst}
	if err == nil {
		t.mode = st.Mode().Perm() // a replaced file keeps its permissions
	}
	t.f, err = os.OpenFile(t.tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666) // the umask applies, as for cp
	if err != nil {
		return nil, failed("create regular file", err, dst)
	}
	return t, nil
}

// commit closes the file and renames the temporary over the target.
func (t *localTarget) commit() error {
	t.done = true
	if t.tmp == "" {
		return failed("write", t.f.Close(), t.final)
	}
	err := t.f.Close()
	if err == nil && t.mode != 0 {
		err = os.Chmod(t.tmp, t.mode)
	}
	if err == nil {
		err = os.Rename(t.tmp, t.final)
	}
	if err != nil {
		os.Remove(t.tmp)
		return failed("write", err, t.final)
	}
	return nil
}

// abort closes and removes the temporary, unless commit ran.
func (t *localTarget) abort() {
	if t.done {
		return
	}
	t.f.Close()
	if t.tmp != "" {
		os.Remove(t.tmp)
	}
}
