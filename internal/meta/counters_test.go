package meta_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"

	"poolfs/internal/meta"
	"poolfs/internal/meta/metatest"
)

// readLog is an Engine that records the keys its transactions read.
type readLog struct {
	meta.Engine
	mu    sync.Mutex
	reads [][]byte
}

func (r *readLog) Update(ctx context.Context, fn func(meta.Tx) error) error {
	return r.Engine.Update(ctx, func(tx meta.Tx) error { return fn(&readLogTx{Tx: tx, log: r}) })
}

type readLogTx struct {
	meta.Tx
	log *readLog
}

func (t *readLogTx) Get(key []byte) ([]byte, error) {
	t.log.mu.Lock()
	t.log.reads = append(t.log.reads, append([]byte(nil), key...))
	t.log.mu.Unlock()
	return t.Tx.Get(key)
}

func (t *readLogTx) Scan(start, end []byte, limit int, fn func(key, value []byte) bool) error {
	return t.Tx.Scan(start, end, limit, func(k, v []byte) bool {
		t.log.mu.Lock()
		t.log.reads = append(t.log.reads, append([]byte(nil), k...))
		t.log.mu.Unlock()
		return fn(k, v)
	})
}

// TestCreatesReadNoSharedCount: a create reads no key another create
// writes: it counts its inode in a key of its own (the "n" mark), not in
// a shared inode-count shard it must read first, so that concurrent
// creates (one metadata server's concurrent transactions, or several
// servers') never conflict over the count. A removal reads only its own
// inode's mark; the count stays exact.
func TestCreatesReadNoSharedCount(t *testing.T) {
	log := &readLog{Engine: sqliteEngine(t)}
	s := metatest.NewStore(t, log)
	ctx := context.Background()
	d, err := s.Create(ctx, meta.RootIno, "d", meta.TypeDir, 0o755, 0, 0, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	const n = 20
	log.reads = nil
	for i := range n {
		if _, err := s.Create(ctx, d.Ino, fmt.Sprintf("f%d", i), meta.TypeFile, 0o644, 0, 0, 0, ""); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range log.reads {
		if bytes.HasPrefix(k, []byte("cn")) || k[0] == 'n' {
			t.Errorf("a create read count key %q", k)
		}
	}
	if got, err := s.Statfs(ctx); err != nil || got != n+2 {
		t.Fatalf("statfs: %d inodes, %v; want %d", got, err, n+2)
	}
	log.reads = nil
	if err := s.Unlink(ctx, d.Ino, "f0"); err != nil {
		t.Fatal(err)
	}
	for _, k := range log.reads {
		if bytes.HasPrefix(k, []byte("cn")) {
			t.Errorf("a removal read count shard %q", k)
		}
	}
	if got, err := s.Statfs(ctx); err != nil || got != n+1 {
		t.Fatalf("statfs after a removal: %d inodes, %v; want %d", got, err, n+1)
	}
}

// TestFoldCountsKeepsStatfs: folding the inode-count marks into the
// shards leaves the count unchanged, before and after removals of
// inodes counted either way, and leaves no mark behind.
func TestFoldCountsKeepsStatfs(t *testing.T) {
	e := sqliteEngine(t)
	s := metatest.NewStore(t, e)
	ctx := context.Background()
	statfs := func(want uint64) {
		t.Helper()
		if got, err := s.Statfs(ctx); err != nil || got != want {
			t.Fatalf("statfs: %d inodes, %v; want %d", got, err, want)
		}
	}
	marks := func() int {
		t.Helper()
		n := 0
		if err := e.View(ctx, func(tx meta.Tx) error {
			return tx.Scan([]byte("n"), []byte("o"), 0, func(_, _ []byte) bool { n++; return true })
		}); err != nil {
			t.Fatal(err)
		}
		return n
	}
	const n = 30
	for i := range n {
		if _, err := s.Create(ctx, meta.RootIno, fmt.Sprintf("a%d", i), meta.TypeFile, 0o644, 0, 0, 0, ""); err != nil {
			t.Fatal(err)
		}
	}
	if got := marks(); got != n {
		t.Fatalf("%d marks after %d creates", got, n)
	}
	moved, err := s.FoldCounts(ctx)
	if err != nil || moved != n {
		t.Fatalf("fold: moved %d, %v; want %d", moved, err, n)
	}
	statfs(n + 1)
	if got := marks(); got != 0 {
		t.Fatalf("%d marks left after a fold", got)
	}
	// Removals of folded inodes (and a create and removal between
	// folds) write -1 marks, which fold like the others.
	for i := range n / 2 {
		if err := s.Unlink(ctx, meta.RootIno, fmt.Sprintf("a%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Create(ctx, meta.RootIno, "b", meta.TypeFile, 0o644, 0, 0, 0, ""); err != nil {
		t.Fatal(err)
	}
	if err := s.Unlink(ctx, meta.RootIno, "b"); err != nil {
		t.Fatal(err)
	}
	statfs(n/2 + 1)
	if moved, err := s.FoldCounts(ctx); err != nil || moved != n/2 {
		t.Fatalf("second fold: moved %d, %v; want %d", moved, err, n/2)
	}
	statfs(n/2 + 1)
	if moved, err := s.FoldCounts(ctx); err != nil || moved != 0 {
		t.Fatalf("fold with no marks: moved %d, %v", moved, err)
	}
}
