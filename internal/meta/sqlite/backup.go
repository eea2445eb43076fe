package sqlite

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"poolfs/internal/privfile"
)

// Backup writes a consistent copy of the committed database to dst with
// VACUUM INTO on a read connection (a snapshot: writers go on meanwhile;
// updates lingering uncommitted are not in it, so callers Sync first, as
// meta.Store.Backup does). dst must not exist; it is created with mode
// 0600 and fsynced, and removed if the backup fails.
func (e *Engine) Backup(ctx context.Context, dst string) error {
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("sqlite backup: %w", err)
	}
	f.Close()
	err = e.backup(ctx, dst)
	if err != nil {
		os.Remove(dst)
		return fmt.Errorf("sqlite backup of %s to %s: %w", e.path, dst, err)
	}
	return nil
}

func (e *Engine) backup(ctx context.Context, dst string) error {
	conn, err := e.rdb.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	// query_only forbids VACUUM INTO on the read connections; lift it on
	// this one for the statement (it writes only dst).
	if _, err := conn.ExecContext(ctx, `PRAGMA query_only = 0`); err != nil {
		return err
	}
	defer conn.ExecContext(context.Background(), `PRAGMA query_only = 1`) //nolint:errcheck
	if _, err := conn.ExecContext(ctx, `VACUUM INTO ?`, dst); err != nil {
		return err
	}
	return syncFile(dst)
}

// Restore puts the backup file src in place of the database at path:
// it verifies src (Verify), takes the database's lock (so it fails if an
// engine has it open: stop the cluster first), copies src next to it,
// fsyncs the copy, moves the current database aside to
// path.replaced-<unix time> (nothing is deleted), removes its WAL and
// shared-memory files, which belong to the replaced database, and renames
// the copy into place. It returns the name the old database was moved to
// ("" if there was none).
func Restore(ctx context.Context, src, path string) (old string, err error) {
	if err := Verify(ctx, src); err != nil {
		return "", fmt.Errorf("restore: backup %s: %w", src, err)
	}
	_, statErr := os.Stat(path)
	lock, err := lockFile(path)
	if err != nil {
		return "", fmt.Errorf("restore: %w", err)
	}
	defer lock.Close()
	tmp := path + ".restore-tmp"
	if err := copyFile(src, tmp); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("restore: copy %s: %w", src, err)
	}
	old, err = replaceLocked(path, tmp, "replaced", statErr == nil)
	if err != nil {
		return "", fmt.Errorf("restore: %w", err)
	}
	return old, nil
}

// replaceLocked puts the database file tmp in place of the one at path,
// whose lock the caller holds: with exists, the current database is kept
// as path.<what>-<unix time> (a hard link) and its WAL and shared-memory
// files, which belong to it, move along; then tmp is renamed over path
// and the directory fsynced. It returns the name the old database was
// kept as ("" if none). tmp is removed on failure.
func replaceLocked(path, tmp, what string, exists bool) (old string, err error) {
	if exists {
		old = fmt.Sprintf("%s.%s-%d", path, what, time.Now().Unix())
		if err := os.Link(path, old); err != nil {
			os.Remove(tmp)
			return "", fmt.Errorf("keep the current database: %w", err)
		}
		for _, p := range []string{path + "-wal", path + "-shm"} {
			if err := os.Rename(p, old+p[len(path):]); err != nil && !os.IsNotExist(err) {
				os.Remove(tmp)
				return "", err
			}
		}
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return "", err
	}
	return old, privfile.Fsync(filepath.Dir(path))
}

// copyFile copies src to the new file dst (mode 0600) and fsyncs it.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// syncFile fsyncs the file at p and its directory.
func syncFile(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	err = f.Sync()
	f.Close()
	if err != nil {
		return err
	}
	return privfile.Fsync(filepath.Dir(p))
}
