package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Sync makes every transaction committed before the call durable. Commits
// are durable at once with synchronous_commit=on (the default); a URL with
// synchronous_commit=off (a run-time parameter pgx passes to the server,
// postgres://host/db?synchronous_commit=off) defers durability to Sync, as
// SQLite's deferred mode does: commits stay atomic and visible to every
// metadata server, and a crash of the PostgreSQL server loses at most the
// ones since the last Sync (or the WAL writer's flush).
//
// Sync commits a transaction that takes a transaction ID, with
// synchronous_commit=on: its commit waits until the WAL is flushed up to
// its commit record, which follows every earlier commit's.
func (e *Engine) Sync(ctx context.Context) error {
	c, err := e.acquire(ctx)
	if err != nil {
		return err
	}
	defer e.release(c)
	err = pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL synchronous_commit = on`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `SELECT txid_current()`)
		return err
	})
	if err != nil {
		return fmt.Errorf("postgres sync: %w", err)
	}
	return nil
}
