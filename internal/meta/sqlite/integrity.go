package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/mattn/go-sqlite3"

	"poolfs/internal/meta"
)

var (
	_ meta.Checker  = (*Engine)(nil)
	_ meta.Backuper = (*Engine)(nil)
)

// maxProblems bounds the problems an integrity check collects and reports.
const maxProblems = 3

// CheckIntegrity runs PRAGMA quick_check (or, with full, integrity_check)
// on a read connection, which sees the last committed state. It returns an
// error wrapping meta.ErrStoreCorrupt that names the database and the
// first problems SQLite found, or nil if there are none.
func (e *Engine) CheckIntegrity(ctx context.Context, full bool) error {
	conn, err := e.rdb.Conn(ctx)
	if err != nil {
		return fmt.Errorf("sqlite %s: integrity check: %w", e.path, err)
	}
	defer conn.Close()
	return checkIntegrity(ctx, conn, e.path, full)
}

// querier is what an integrity check runs on: a *sql.DB or a *sql.Conn.
type querier interface {
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
}

func checkIntegrity(ctx context.Context, db querier, path string, full bool) error {
	pragma := fmt.Sprintf("PRAGMA quick_check(%d)", maxProblems)
	if full {
		pragma = fmt.Sprintf("PRAGMA integrity_check(%d)", maxProblems)
	}
	rows, err := db.QueryContext(ctx, pragma)
	if err != nil {
		return corruptErr(path, err)
	}
	var problems []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			rows.Close()
			return corruptErr(path, err)
		}
		if s != "ok" {
			problems = append(problems, strings.Join(strings.Fields(s), " "))
		}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return corruptErr(path, err)
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s: %s", meta.ErrStoreCorrupt, path, strings.Join(problems, "; "))
	}
	return nil
}

// corruptErr wraps err with meta.ErrStoreCorrupt if SQLite reported a
// malformed database or a file that is not one.
func corruptErr(path string, err error) error {
	var se sqlite3.Error
	if errors.As(err, &se) && (se.Code == sqlite3.ErrCorrupt || se.Code == sqlite3.ErrNotADB) {
		return fmt.Errorf("%w: %s: %v", meta.ErrStoreCorrupt, path, err)
	}
	return fmt.Errorf("sqlite %s: %w", path, err)
}

// Verify opens the database file at path read-only, without taking it
// over, and runs the full integrity check and a check that it holds
// poolfs's table. It is what a restore runs on a backup before putting it
// in place.
func Verify(ctx context.Context, path string) error {
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("sqlite verify: %w", err)
	}
	db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
	if err != nil {
		return fmt.Errorf("sqlite verify %s: %w", path, err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if err := checkIntegrity(ctx, db, path, true); err != nil {
		return err
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE name = 'kv'`).Scan(&n); err != nil {
		return corruptErr(path, err)
	}
	if n != 1 {
		return fmt.Errorf("%w: %s has no poolfs metadata table", meta.ErrStoreCorrupt, path)
	}
	return nil
}
