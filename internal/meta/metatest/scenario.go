package metatest

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"poolfs/internal/meta"
)

var rewrite = flag.Bool("rewrite", false, "rewrite metatest scenario files (testdata/*.txt) with the actual output")

// Scenario files are lists of namespace commands, one per line, each
// followed by its expected output lines, which start with "> ". Lines
// starting with # and blank lines are comments. Commands:
//
//	mkdir PATH [MODE]        create PATH [MODE]      symlink PATH TARGET
//	mknod PATH fifo|socket   link OLD NEW            unlink PATH
//	rmdir PATH               rename OLD NEW [noreplace|exchange]
//	ls PATH                  stat PATH               tree
//	truncate PATH SIZE       commit PATH STRIPE GEN OLDGEN SIZE
//	gc                       statfs
//
// A failing command prints its error as an errno name (ENOENT, ...).
func runScenarios(t *testing.T, open func(t *testing.T) meta.Engine) {
	_, file, _, _ := runtime.Caller(0)
	files, err := filepath.Glob(filepath.Join(filepath.Dir(file), "testdata", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenario files next to %s: %v", file, err)
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			runScenario(t, NewStore(t, open(t)), path)
		})
	}
}

func runScenario(t *testing.T, s *meta.Store, path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	var out strings.Builder
	r := &runner{s: s}
	for i := 0; i < len(lines); {
		line := lines[i]
		i++
		if strings.HasPrefix(line, "> ") || line == ">" {
			t.Errorf("%s:%d: output without a command", path, i)
			continue
		}
		out.WriteString(line + "\n")
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		start := i
		var want []string
		for i < len(lines) && strings.HasPrefix(lines[i], ">") {
			want = append(want, strings.TrimPrefix(strings.TrimPrefix(lines[i], ">"), " "))
			i++
		}
		got := r.do(strings.Fields(line))
		for _, g := range got {
			out.WriteString("> " + g + "\n")
		}
		if !*rewrite && strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s:%d: %s\ngot:\n  %s\nwant:\n  %s", path, start, line,
				strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}
	}
	if *rewrite {
		if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

type runner struct{ s *meta.Store }

var errnos = []struct {
	err  error
	name string
}{
	{meta.ErrNotFound, "ENOENT"}, {meta.ErrExist, "EEXIST"}, {meta.ErrNotDir, "ENOTDIR"},
	{meta.ErrIsDir, "EISDIR"}, {meta.ErrNotEmpty, "ENOTEMPTY"}, {meta.ErrInvalid, "EINVAL"},
	{meta.ErrNameTooLong, "ENAMETOOLONG"}, {meta.ErrPerm, "EPERM"}, {meta.ErrConflict, "ECONFLICT"},
	{meta.ErrPoolFull, "ENOSPC"},
}

func errno(err error) []string {
	for _, e := range errnos {
		if errors.Is(err, e.err) {
			return []string{e.name}
		}
	}
	return []string{"error: " + err.Error()}
}

// resolve returns the inode of path.
func (r *runner) resolve(path string) (meta.Attr, error) {
	a, err := r.s.Getattr(bg, meta.RootIno)
	for _, name := range strings.Split(strings.Trim(path, "/"), "/") {
		if err != nil || name == "" {
			break
		}
		a, err = r.s.Lookup(bg, a.Ino, name)
	}
	return a, err
}

// parent returns the parent directory of path and the last name.
func (r *runner) parent(path string) (meta.Ino, string, error) {
	dir, name := filepath.Split(strings.TrimRight(path, "/"))
	a, err := r.resolve(dir)
	return a.Ino, name, err
}

func (r *runner) do(args []string) []string {
	if len(args) == 0 {
		return nil
	}
	out, err := r.run(args[0], args[1:])
	if err != nil {
		return errno(err)
	}
	return out
}

func num(s string) uint64 {
	n, _ := strconv.ParseUint(s, 0, 64)
	return n
}

func (r *runner) run(cmd string, a []string) ([]string, error) {
	arg := func(i int) string {
		if i < len(a) {
			return a[i]
		}
		return ""
	}
	s := r.s
	switch cmd {
	case "mkdir", "create", "symlink", "mknod":
		p, name, err := r.parent(arg(0))
		if err != nil {
			return nil, err
		}
		typ, mode, target := meta.TypeFile, uint32(0644), ""
		switch cmd {
		case "mkdir":
			typ, mode = meta.TypeDir, 0755
		case "symlink":
			typ, mode, target = meta.TypeSymlink, 0777, arg(1)
		case "mknod":
			typ = map[string]meta.FileType{"fifo": meta.TypeFIFO, "socket": meta.TypeSocket}[arg(1)]
		}
		if cmd != "symlink" && cmd != "mknod" && arg(1) != "" {
			mode = uint32(num(arg(1)))
		}
		_, err = s.Create(bg, p, name, typ, mode, 0, 0, 0, target)
		return nil, err
	case "link":
		src, err := r.resolve(arg(0))
		if err != nil {
			return nil, err
		}
		p, name, err := r.parent(arg(1))
		if err != nil {
			return nil, err
		}
		_, err = s.Link(bg, src.Ino, p, name)
		return nil, err
	case "unlink", "rmdir":
		p, name, err := r.parent(arg(0))
		if err != nil {
			return nil, err
		}
		if cmd == "rmdir" {
			return nil, s.Rmdir(bg, p, name)
		}
		return nil, s.Unlink(bg, p, name)
	case "rename":
		op, on, err := r.parent(arg(0))
		if err != nil {
			return nil, err
		}
		np, nn, err := r.parent(arg(1))
		if err != nil {
			return nil, err
		}
		flags := map[string]meta.RenameFlags{"noreplace": meta.RenameNoReplace, "exchange": meta.RenameExchange}[arg(2)]
		return nil, s.Rename(bg, op, on, np, nn, flags)
	case "ls":
		d, err := r.resolve(arg(0))
		if err != nil {
			return nil, err
		}
		ents, err := s.Readdir(bg, d.Ino, "", 0)
		var out []string
		for _, e := range ents {
			out = append(out, e.Name+" "+e.Type.String())
		}
		return out, err
	case "stat":
		at, err := r.resolve(arg(0))
		return []string{describe(at)}, err
	case "tree":
		var out []string
		err := r.tree(meta.RootIno, "", &out)
		return out, err
	case "truncate":
		at, err := r.resolve(arg(0))
		if err != nil {
			return nil, err
		}
		_, err = s.Setattr(bg, at.Ino, meta.SetAttr{Valid: meta.SetSize, Size: num(arg(1))})
		return nil, err
	case "commit":
		at, err := r.resolve(arg(0))
		if err != nil {
			return nil, err
		}
		c := meta.StripeCommit{Rec: rec(num(arg(1)), num(arg(2))), OldGen: num(arg(3))}
		_, err = s.CommitStripes(bg, at.Ino, []meta.StripeCommit{c}, num(arg(4)), 0)
		return nil, err
	case "gc":
		items, err := s.GCList(bg, 0)
		var out []string
		for _, g := range items {
			out = append(out, fmt.Sprintf("stripe %d gen %d", g.Stripe, g.Gen))
		}
		return out, err
	case "statfs":
		n, err := s.Statfs(bg)
		return []string{fmt.Sprintf("inodes %d", n)}, err
	}
	return []string{"unknown command " + cmd}, nil
}

func describe(a meta.Attr) string {
	d := fmt.Sprintf("%v mode=%04o nlink=%d size=%d", a.Type, a.Mode, a.Nlink, a.Size)
	if a.Target != "" {
		d += " target=" + a.Target
	}
	return d
}

func (r *runner) tree(dir meta.Ino, prefix string, out *[]string) error {
	ents, err := r.s.Readdir(bg, dir, "", 0)
	if err != nil {
		return err
	}
	for _, e := range ents {
		a, err := r.s.Getattr(bg, e.Ino)
		if err != nil {
			return err
		}
		*out = append(*out, prefix+"/"+e.Name+" "+describe(a))
		if e.Type == meta.TypeDir {
			if err := r.tree(e.Ino, prefix+"/"+e.Name, out); err != nil {
				return err
			}
		}
	}
	return nil
}
