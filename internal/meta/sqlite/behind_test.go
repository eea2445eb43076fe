package sqlite_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"poolfs/internal/meta"
	"poolfs/internal/meta/sqlite"
)

// TestLingerStoresAKeyOnce: the writes of a lingering transaction's
// updates run at its commit, so a key that many updates wrote (as a
// file's inode by its create, its close and its release, and the usage
// counters by every update) costs one statement, not one per update, and
// the last value is the one stored.
func TestLingerStoresAKeyOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "meta.db")
	ctx := context.Background()
	e, err := sqlite.OpenWith(path, sqlite.Options{Deferred: true, Linger: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	const n = 50
	for i := range n {
		v := fmt.Appendf(nil, "v%03d", i)
		if err := e.Update(ctx, func(tx meta.Tx) error {
			if err := tx.Put([]byte("counter"), v); err != nil {
				return err
			}
			return tx.Put(fmt.Appendf(nil, "file%03d", i), v)
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := e.Stats().Writes, uint64(n+1); got != want {
		t.Errorf("%d updates of one key and one new key each ran %d put statements, want %d", n, got, want)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e, err = sqlite.OpenWith(path, sqlite.Options{Deferred: true, Linger: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if got := get(t, e, "counter"); string(got) != fmt.Sprintf("v%03d", n-1) {
		t.Errorf("after reopen counter = %q, want the last update's", got)
	}
	if got := keys(t, e, "file", "filf"); len(got) != n {
		t.Errorf("after reopen %d files, want %d", len(got), n)
	}
}

// TestLingerWritesBehindReadBack: writes not yet run in SQLite are what
// every read sees: a Get of a key the cache has evicted (from an update
// and from a View), a scan in a View, and a scan in the update that made
// them (between its own writes and after a delete); an update that fails
// after such a scan leaves nothing, and a later Sync makes the rest
// durable.
func TestLingerWritesBehindReadBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "meta.db")
	ctx := context.Background()
	opts := sqlite.Options{Deferred: true, Linger: time.Hour, CacheEntries: 4}
	e, err := sqlite.OpenWith(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	const n = 40
	for i := range n {
		k := fmt.Appendf(nil, "a%03d", i)
		if err := e.Update(ctx, func(tx meta.Tx) error { return tx.Put(k, k) }); err != nil {
			t.Fatal(err)
		}
	}
	// A cache of 4 entries holds almost none of them.
	for i := range n {
		k := fmt.Sprintf("a%03d", i)
		if got := get(t, e, k); got == nil || string(got) != k {
			t.Fatalf("view: get %s = %q", k, got)
		}
		var got []byte
		if err := e.Update(ctx, func(tx meta.Tx) error {
			v, err := tx.Get([]byte(k))
			got = v
			return err
		}); err != nil || string(got) != k {
			t.Fatalf("update: get %s = %q, %v", k, got, err)
		}
	}
	// One update deletes and adds, scanning in between.
	var seen []string
	if err := e.Update(ctx, func(tx meta.Tx) error {
		if err := tx.Delete([]byte("a001")); err != nil {
			return err
		}
		if err := tx.Put([]byte("a999"), []byte("new")); err != nil {
			return err
		}
		return tx.Scan([]byte("a"), []byte("b"), 0, func(k, _ []byte) bool {
			seen = append(seen, string(k))
			return true
		})
	}); err != nil {
		t.Fatal(err)
	}
	if len(seen) != n || seen[0] != "a000" || seen[1] != "a002" || seen[n-1] != "a999" {
		t.Fatalf("scan in the update saw %d keys %v..., want a000, a002, ..., a999", len(seen), seen[:min(3, len(seen))])
	}
	// A failed update whose writes a scan of its own made run early is
	// rolled back, the acknowledged writes run with them are not.
	boom := errors.New("boom")
	if err := e.Update(ctx, func(tx meta.Tx) error {
		if err := tx.Put([]byte("a500"), []byte("x")); err != nil {
			return err
		}
		if err := tx.Delete([]byte("a002")); err != nil {
			return err
		}
		n := 0
		if err := tx.Scan([]byte("a5"), []byte("a6"), 0, func(_, _ []byte) bool { n++; return true }); err != nil {
			return err
		}
		if n != 1 {
			return fmt.Errorf("scan saw %d of the update's own keys, want 1", n)
		}
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("failing update returned %v", err)
	}
	check := func(e *sqlite.Engine, when string) {
		t.Helper()
		got := keys(t, e, "a", "b")
		if len(got) != n || got[0] != "a000" || got[1] != "a002" || got[n-1] != "a999" {
			t.Fatalf("%s: %d keys %v..., want a000, a002, ..., a999", when, len(got), got[:min(3, len(got))])
		}
		if v := get(t, e, "a500"); v != nil {
			t.Fatalf("%s: the failed update's a500 = %q", when, v)
		}
		if v := get(t, e, "a999"); string(v) != "new" {
			t.Fatalf("%s: a999 = %q", when, v)
		}
	}
	check(e, "before Sync")
	if err := e.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	check(e, "after Sync")
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e, err = sqlite.OpenWith(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	check(e, "after reopen")
}

// get returns key's value in a View, nil if absent.
func get(t *testing.T, e *sqlite.Engine, key string) []byte {
	t.Helper()
	var v []byte
	err := e.View(context.Background(), func(tx meta.Tx) error {
		var err error
		v, err = tx.Get([]byte(key))
		return err
	})
	if errors.Is(err, meta.ErrNoKey) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Clone(v)
}

// keys returns the keys in [start, end) that a View's scan sees.
func keys(t *testing.T, e *sqlite.Engine, start, end string) []string {
	t.Helper()
	var out []string
	if err := e.View(context.Background(), func(tx meta.Tx) error {
		out = nil
		return tx.Scan([]byte(start), []byte(end), 0, func(k, _ []byte) bool {
			out = append(out, string(k))
			return true
		})
	}); err != nil {
		t.Fatal(err)
	}
	return out
}
