// Package privfile writes files that only their owner may read or write
// (mode 0600), atomically and durably: the bytes go to a new temporary file
// in the same directory, made 0600 when created (never left to the umask,
// never an older file whose mode a rename would keep), fsynced, renamed
// over the target, and the directory is fsynced. A reader sees the old
// file or the new one, never part of either, and after Write returns the
// new one survives a crash. Cluster secrets, keys, certificates, the
// dashboard's users and its history are written through it. Fsync, the
// one fsync of a path by name, also serves the drives and the SQLite
// backup.
package privfile

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Mode is the mode of every file written here.
const Mode os.FileMode = 0o600

// Write replaces path with b (see the package comment).
func Write(path string, b []byte) error {
	return WriteWith(path, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}

// WriteWith replaces path with what fill writes (see the package comment).
// If fill fails, path is left as it was.
func WriteWith(path string, fill func(io.Writer) error) error {
	dir := filepath.Dir(path)
	// os.CreateTemp makes the file 0600 and O_EXCL: new, and private from
	// its first byte.
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename, a no-op
	err = tmp.Chmod(Mode)       // whatever the platform's CreateTemp mode
	if err == nil {
		err = fill(tmp)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err == nil {
		err = Fsync(dir)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// Fsync opens the file or directory at path and fsyncs it: for a
// directory, the names created, renamed or removed in it become durable.
func Fsync(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
