package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"poolfs/internal/meta"
	"poolfs/internal/meta/sqlite"
)

// TestLingerCompilesStatementsOnce: the updates of one lingering
// transaction share its compiled statements, the savepoint that each runs
// in included (SQLite compiles a statement run from its text on every
// call: two per update), and a failed update still rolls back to its
// savepoint alone.
func TestLingerCompilesStatementsOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "meta.db")
	ctx := context.Background()
	e, err := sqlite.OpenWith(path, sqlite.Options{Deferred: true, Linger: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	const n = 100
	boom := errors.New("boom")
	for i := range n {
		k := fmt.Appendf(nil, "k%03d", i)
		if err := e.Update(ctx, func(tx meta.Tx) error { return tx.Put(k, k) }); err != nil {
			t.Fatal(err)
		}
		if i%10 == 5 { // a failed update among them leaves nothing
			if err := e.Update(ctx, func(tx meta.Tx) error {
				if err := tx.Put(fmt.Appendf(nil, "x%03d", i), []byte("x")); err != nil {
					return err
				}
				return boom
			}); !errors.Is(err, boom) {
				t.Fatalf("failing update returned %v", err)
			}
		}
	}
	if err := e.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	st := e.Stats()
	// BEGIN, COMMIT, the put, SAVEPOINT, RELEASE and ROLLBACK TO; 2n and
	// more when each update compiled its own.
	if st.Batches != 1 || st.Compiled > 6 {
		t.Errorf("%d updates in %d transactions compiled %d statements, want one transaction and at most 6",
			st.Updates, st.Batches, st.Compiled)
	}
	if got := closeAndCount(t, e, path); got != n {
		t.Fatalf("after reopen: %d keys, want the %d of the updates that succeeded", got, n)
	}
}
