package postgres_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"poolfs/internal/meta"
	"poolfs/internal/meta/metatest"
	"poolfs/internal/meta/pgtest"
	"poolfs/internal/meta/postgres"
)

// TestCreateTwoRoundTrips: a create (with open) reads everything it needs
// in one round trip sent with BEGIN and writes with COMMIT in a second,
// instead of one round trip per key read.
func TestCreateTwoRoundTrips(t *testing.T) {
	e, s, d := pgDir(t)
	ctx := context.Background()
	const n = 20
	inos := make([]meta.Ino, n)
	before := e.Stats()
	for i := range n {
		c, _, err := s.CreateAttr(ctx, meta.CreateArgs{Parent: d.Ino, Name: fmt.Sprintf("f%d", i), Type: meta.TypeFile, Mode: 0o644, Open: true})
		if err != nil {
			t.Fatal(err)
		}
		inos[i] = c.Ino
	}
	rt := e.Stats().RoundTrips - before.RoundTrips
	for i, ino := range inos {
		if got, err := s.Lookup(ctx, d.Ino, fmt.Sprintf("f%d", i)); err != nil || got.Ino != ino || got.Nlink != 1 {
			t.Fatalf("lookup f%d: %+v, %v; created %d", i, got, err, ino)
		}
	}
	// An inode-number block is reserved once in 1024 creates: at most one
	// create here reads the counter in a round trip of its own.
	if rt > 2*n+1 {
		t.Fatalf("%d creates took %d round trips, want at most %d", n, rt, 2*n+1)
	}
	if _, err := s.Create(ctx, d.Ino, "f0", meta.TypeFile, 0o644, 0, 0, 0, ""); !errors.Is(err, meta.ErrExist) {
		t.Fatalf("create of an existing name: %v, want ErrExist", err)
	}
}

// TestUnlinkThreeRoundTrips: an unlink reads the directory and the name
// with BEGIN, then the file's inode, open count and inode-count mark in
// one request, and writes with COMMIT: three round trips, where each key
// read was one of its own (six).
func TestUnlinkThreeRoundTrips(t *testing.T) {
	e, s, d := pgDir(t)
	ctx := context.Background()
	const n = 10
	for i := range n {
		if _, err := s.Create(ctx, d.Ino, fmt.Sprintf("f%d", i), meta.TypeFile, 0o644, 0, 0, 0, ""); err != nil {
			t.Fatal(err)
		}
	}
	before := e.Stats().RoundTrips
	for i := range n {
		if err := s.Unlink(ctx, d.Ino, fmt.Sprintf("f%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if rt := e.Stats().RoundTrips - before; rt != 3*n {
		t.Errorf("%d unlinks took %d round trips, want %d", n, rt, 3*n)
	}
	if got, err := s.Statfs(ctx); err != nil || got != 2 {
		t.Errorf("statfs: %d inodes, %v; want 2", got, err)
	}
	for i := range n {
		if _, err := s.Lookup(ctx, d.Ino, fmt.Sprintf("f%d", i)); !errors.Is(err, meta.ErrNotFound) {
			t.Errorf("lookup of unlinked f%d: %v", i, err)
		}
	}
}

// TestPrefetch: prefetched keys read as Get would, present or absent, and
// the transaction's own writes win over what was prefetched.
func TestPrefetch(t *testing.T) {
	e := openPG(t)
	ctx := context.Background()
	if err := e.Update(ctx, func(tx meta.Tx) error { return tx.Put([]byte("a"), []byte("1")) }); err != nil {
		t.Fatal(err)
	}
	err := e.Update(ctx, func(tx meta.Tx) error {
		p, ok := tx.(meta.Prefetcher)
		if !ok {
			return errors.New("the postgres transaction is no Prefetcher")
		}
		if err := tx.Put([]byte("c"), []byte("3")); err != nil {
			return err
		}
		before := e.Stats().RoundTrips
		if err := p.Prefetch([]byte("a"), []byte("b"), []byte("c")); err != nil {
			return err
		}
		if v, err := tx.Get([]byte("a")); err != nil || !bytes.Equal(v, []byte("1")) {
			return fmt.Errorf("get a: %q, %v", v, err)
		}
		if _, err := tx.Get([]byte("b")); !errors.Is(err, meta.ErrNoKey) {
			return fmt.Errorf("get of absent b: %v, want ErrNoKey", err)
		}
		if v, err := tx.Get([]byte("c")); err != nil || !bytes.Equal(v, []byte("3")) {
			return fmt.Errorf("get c (written before): %q, %v", v, err)
		}
		if got := e.Stats().RoundTrips - before; got != 1 {
			return fmt.Errorf("prefetch and gets took %d round trips, want 1", got)
		}
		if err := tx.Put([]byte("b"), []byte("2")); err != nil {
			return err
		}
		if err := tx.Delete([]byte("a")); err != nil {
			return err
		}
		if v, err := tx.Get([]byte("b")); err != nil || !bytes.Equal(v, []byte("2")) {
			return fmt.Errorf("get b after put: %q, %v", v, err)
		}
		if _, err := tx.Get([]byte("a")); !errors.Is(err, meta.ErrNoKey) {
			return fmt.Errorf("get a after delete: %v, want ErrNoKey", err)
		}
		// A Scan sends the writes to the server; they still win.
		if err := tx.Scan([]byte("z"), nil, 1, func(_, _ []byte) bool { return true }); err != nil {
			return err
		}
		if _, err := tx.Get([]byte("a")); !errors.Is(err, meta.ErrNoKey) {
			return fmt.Errorf("get a after delete and scan: %v, want ErrNoKey", err)
		}
		if v, err := tx.Get([]byte("b")); err != nil || !bytes.Equal(v, []byte("2")) {
			return fmt.Errorf("get b after put and scan: %q, %v", v, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"b": "2", "c": "3"}
	got := map[string]string{}
	err = e.View(ctx, func(tx meta.Tx) error {
		return tx.Scan([]byte("a"), []byte("d"), 0, func(k, v []byte) bool { got[string(k)] = string(v); return true })
	})
	if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after commit: %v, %v; want %v", got, err, want)
	}
}

// pgDir returns a store over a fresh PostgreSQL engine (and the engine)
// holding one empty directory "d" in the root.
func pgDir(t *testing.T) (*postgres.Engine, *meta.Store, meta.Attr) {
	t.Helper()
	e := openPG(t)
	s := metatest.NewStore(t, e)
	d, err := s.Create(context.Background(), meta.RootIno, "d", meta.TypeDir, 0o755, 0, 0, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	return e, s, d
}

func openPG(t *testing.T) *postgres.Engine {
	e, err := postgres.Open(context.Background(), pgtest.Start(t), testOwner)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}
