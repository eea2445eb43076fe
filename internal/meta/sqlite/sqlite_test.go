package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"poolfs/internal/meta"
	"poolfs/internal/meta/metatest"
	"poolfs/internal/meta/sqlite"
)

func opener(o sqlite.Options) func(t *testing.T) meta.Engine {
	return func(t *testing.T) meta.Engine {
		e, err := sqlite.OpenWith(filepath.Join(t.TempDir(), "meta.db"), o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := e.Close(); err != nil {
				t.Error(err)
			}
		})
		return e
	}
}

func TestConformance(t *testing.T) { metatest.Run(t, opener(sqlite.Options{})) }

func TestConformanceDeferred(t *testing.T) { metatest.Run(t, opener(sqlite.Options{Deferred: true})) }

// TestDeferredSurvivesReopen: deferred commits are atomic and, after Sync,
// read back from a fresh engine on the same file.
func TestDeferredSurvivesReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "meta.db")
	ctx := context.Background()
	e, err := sqlite.OpenWith(path, sqlite.Options{Deferred: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		k := []byte{byte(i)}
		if err := e.Update(ctx, func(tx meta.Tx) error { return tx.Put(k, k) }); err != nil {
			t.Fatal(err)
		}
	}
	var _ meta.Syncer = e
	if err := e.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e2, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Close()
	n := 0
	err = e2.View(ctx, func(tx meta.Tx) error {
		return tx.Scan(nil, nil, 0, func(k, v []byte) bool { n++; return true })
	})
	if err != nil || n != 100 {
		t.Fatalf("after reopen: %d keys, %v; want 100", n, err)
	}
}
