package postgres_test

import (
	"context"
	"errors"
	"testing"

	"poolfs/internal/meta"
	"poolfs/internal/meta/metatest"
	"poolfs/internal/meta/pgtest"
	"poolfs/internal/meta/postgres"
)

func open(t *testing.T) meta.Engine {
	e, err := postgres.Open(context.Background(), pgtest.Start(t), testOwner)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func TestConformance(t *testing.T) { metatest.Run(t, open) }

// TestFailedStatementNeverCommits: an update whose statement failed does
// not report success, even when fn carries on as if it had not (here its
// write was lost with the batch a Scan sent).
func TestFailedStatementNeverCommits(t *testing.T) {
	e := open(t)
	ctx, cancel := context.WithCancel(context.Background())
	err := e.Update(ctx, func(tx meta.Tx) error {
		if err := tx.Put([]byte("k"), []byte("v")); err != nil {
			return err
		}
		cancel()
		_ = tx.Scan([]byte("a"), []byte("z"), 0, func(k, v []byte) bool { return true }) // fails, ignored on purpose
		return nil
	})
	if err == nil {
		t.Fatal("an update whose Scan failed reported success")
	}
	err = e.View(context.Background(), func(tx meta.Tx) error {
		_, err := tx.Get([]byte("k"))
		return err
	})
	if !errors.Is(err, meta.ErrNoKey) {
		t.Fatalf("get of the lost write: %v, want ErrNoKey", err)
	}
}

// testOwner is the cluster the tests' databases are bound to.
var testOwner = postgres.Owner{ID: "test-cluster", Where: "test"}
