package cluster

import (
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"poolfs/internal/privfile"
)

// Everything under a cluster directory is its owner's only. The drives
// hold the file data and meta.db the namespace, so a directory other users
// could read would bypass the permissions of every file in the cluster;
// and a lock file another user could open, they could flock, keeping `up`
// from starting. The modes are given where each thing is made (here, in
// chunkstore and in the SQLite engine), never left to the umask.
const (
	privateDirMode  fs.FileMode = 0o700
	privateFileMode fs.FileMode = 0o600
)

// makePrivateDir creates dir and any missing parents 0700. An existing
// directory keeps its mode (tightenDir fixes it).
func makePrivateDir(dir string) error {
	if err := os.MkdirAll(dir, privateDirMode); err != nil {
		return fmt.Errorf("cluster: create directory %s: %w", dir, err)
	}
	return nil
}

// openPrivate opens path read-write, creating it 0600.
func openPrivate(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE, privateFileMode)
}

// writePrivate replaces path with b atomically and durably, 0600
// (privfile.Write).
func writePrivate(path string, b []byte) error { return privfile.Write(path, b) }

// tightenDepth is how deep tightenDir looks: the cluster directory (0), its
// files and drives/ (1), the drive directories (2) and their LOCK, FORMAT
// and data directories (3). Below, nothing is reachable by others once
// those directories are 0700, and a drive may hold millions of files.
const tightenDepth = 3

// tightenDir removes group and other permissions from the cluster
// directory and what an older poolfs made in it with them (0755
// directories, 0644 files), down to tightenDepth, and logs what it
// changed. Symbolic links are left alone (chmod would follow them).
func tightenDir(dir string, log *slog.Logger) error {
	var changed []string
	root := filepath.Clean(dir)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		depth := 0
		if p != root {
			depth = strings.Count(p[len(root):], string(filepath.Separator))
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if mode := info.Mode().Perm(); mode&0o077 != 0 {
			if err := os.Chmod(p, mode&^0o077); err != nil {
				return err
			}
			changed = append(changed, fmt.Sprintf("%s (was %04o)", p, mode))
		}
		if d.IsDir() && depth >= tightenDepth {
			return filepath.SkipDir
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("cluster: make %s private to its owner: %w", dir, err)
	}
	if len(changed) > 0 {
		shown := changed[:min(len(changed), 8)]
		log.Warn("cluster directory was open to other users (made by an older poolfs): removed group and other permissions",
			"dir", dir, "paths", len(changed), "first", strings.Join(shown, ", "))
	}
	return nil
}
