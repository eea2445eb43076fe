package meta

import (
	"context"
	"errors"
	"fmt"
)

// ErrStoreCorrupt means the engine's own storage failed its integrity
// check (for SQLite: PRAGMA quick_check or integrity_check found damaged
// pages). Nothing read from such a store can be trusted: a damaged page
// can hide records (a file's stripes read as holes) as well as garble
// them, so callers refuse to serve it and never delete fragments on its
// word.
var ErrStoreCorrupt = errors.New("meta: metadata store is corrupt")

// ErrNoBackup is returned by Store.Backup for engines that cannot back
// themselves up (PostgreSQL: use pg_dump or pg_basebackup).
var ErrNoBackup = errors.New("meta: this engine has no built-in backup")

// Checker is implemented by engines that can verify their own storage.
type Checker interface {
	// CheckIntegrity verifies the engine's storage: a quick structural
	// check, or with full a complete one (slower). It returns nil if the
	// store is sound, an error wrapping ErrStoreCorrupt naming the first
	// problems if not, or another error if the check could not run.
	CheckIntegrity(ctx context.Context, full bool) error
}

// Backuper is implemented by engines that can write a consistent copy of
// their store while they run.
type Backuper interface {
	// Backup writes a consistent snapshot of the committed store to the new
	// file dst (which must not exist), readable by its owner only.
	Backup(ctx context.Context, dst string) error
}

// CheckIntegrity runs the engine's integrity check (see Checker). An
// engine without one (PostgreSQL keeps its own page checksums and WAL)
// is trusted: nil.
func (s *Store) CheckIntegrity(ctx context.Context, full bool) error {
	if c, ok := s.e.(Checker); ok {
		return c.CheckIntegrity(ctx, full)
	}
	return nil
}

// Backup makes the store's committed state durable (Sync) and writes a
// consistent snapshot of it to dst (see Backuper). Engines without a
// built-in backup return an error wrapping ErrNoBackup.
func (s *Store) Backup(ctx context.Context, dst string) error {
	b, ok := s.e.(Backuper)
	if !ok {
		return fmt.Errorf("%s store: %w", s.e.Dialect().Name, ErrNoBackup)
	}
	if err := s.Sync(ctx); err != nil {
		return fmt.Errorf("backup: sync: %w", err)
	}
	return b.Backup(ctx, dst)
}
