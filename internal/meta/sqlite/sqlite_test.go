package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

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
	if n := closeAndCount(t, e, path); n != 100 {
		t.Fatalf("after reopen: %d keys, want 100", n)
	}
}

// closeAndCount closes e, opens the database at path again and counts its
// keys.
func closeAndCount(t *testing.T, e *sqlite.Engine, path string) int {
	t.Helper()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e2, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Close()
	return countKeys(t, e2)
}

// countKeys counts the keys of e in one View.
func countKeys(t *testing.T, e meta.Engine) int {
	t.Helper()
	n := 0
	if err := e.View(context.Background(), func(tx meta.Tx) error {
		return tx.Scan(nil, nil, 0, func(k, v []byte) bool { n++; return true })
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestConformanceLinger(t *testing.T) {
	metatest.Run(t, opener(sqlite.Options{Deferred: true, Linger: 5 * time.Millisecond}))
}

// TestLingerVisibleAtOnceDurableAtSync: with Linger, an update is seen by
// the next View at once (from the cache, and from the open transaction for
// a key the cache never held and for scans) before it commits; Sync commits
// it, and Close commits what came after.
func TestLingerVisibleAtOnceDurableAtSync(t *testing.T) {
	path := filepath.Join(t.TempDir(), "meta.db")
	ctx := context.Background()
	e, err := sqlite.OpenWith(path, sqlite.Options{Deferred: true, Linger: time.Hour, CacheEntries: 4})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		k := []byte{'k', byte(i)}
		if err := e.Update(ctx, func(tx meta.Tx) error { return tx.Put(k, k) }); err != nil {
			t.Fatal(err)
		}
		// A cache of 4 entries has evicted most keys: the View reads them
		// in the open transaction.
		for j := 0; j <= i; j += 7 {
			var got []byte
			if err := e.View(ctx, func(tx meta.Tx) error {
				v, err := tx.Get([]byte{'k', byte(j)})
				got = v
				return err
			}); err != nil || len(got) != 2 || got[1] != byte(j) {
				t.Fatalf("after %d updates, get k%d = %q, %v", i+1, j, got, err)
			}
		}
		if n := countKeys(t, e); n != i+1 {
			t.Fatalf("after %d updates a scan sees %d keys", i+1, n)
		}
	}
	// A failed update leaves the others alone.
	boom := errors.New("boom")
	if err := e.Update(ctx, func(tx meta.Tx) error {
		if err := tx.Put([]byte("x"), []byte("x")); err != nil {
			return err
		}
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("failing update returned %v", err)
	}
	if err := e.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.Update(ctx, func(tx meta.Tx) error { return tx.Put([]byte("late"), []byte("1")) }); err != nil {
		t.Fatal(err)
	}
	if n := closeAndCount(t, e, path); n != 51 {
		t.Fatalf("after reopen: %d keys, want 50 and the one written after Sync", n)
	}
}

// TestLingerCommitsByItself: a lingering transaction commits after Linger
// without a Sync: another connection to the file sees the update.
func TestLingerCommitsByItself(t *testing.T) {
	path := filepath.Join(t.TempDir(), "meta.db")
	ctx := context.Background()
	const linger = 500 * time.Millisecond
	e, err := sqlite.OpenWith(path, sqlite.Options{Deferred: true, Linger: linger})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	t0 := time.Now()
	if err := e.Update(ctx, func(tx meta.Tx) error { return tx.Put([]byte("a"), []byte("1")) }); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows := func() int {
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM kv WHERE k = x'61'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := rows(); n != 0 && time.Since(t0) < linger {
		t.Fatalf("committed %v after the update, before Linger (%v)", time.Since(t0), linger)
	}
	deadline := time.Now().Add(5 * time.Second)
	for rows() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("not committed 5 s after an update with Linger 500ms")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
