package meta_test

import (
	"context"
	"fmt"
	"testing"

	"poolfs/internal/meta"
	"poolfs/internal/meta/metatest"
)

// TestCreatesShareInodeCountKey: one server's creates (consecutive inode
// numbers of its block) count in one inode-count key, not in a different
// shard each, so that a group of creates in one transaction writes one
// counter key and rarely the same as another server's; the count is
// still right.
func TestCreatesShareInodeCountKey(t *testing.T) {
	e := sqliteEngine(t)
	s := metatest.NewStore(t, e)
	ctx := context.Background()
	const n = 40
	for i := range n {
		if _, err := s.Create(ctx, meta.RootIno, fmt.Sprintf("f%d", i), meta.TypeFile, 0o644, 0, 0, 0, ""); err != nil {
			t.Fatal(err)
		}
	}
	keys := 0
	err := e.View(ctx, func(tx meta.Tx) error {
		return tx.Scan([]byte("cn"), []byte("co"), 0, func(k, _ []byte) bool { keys++; return true })
	})
	if err != nil {
		t.Fatal(err)
	}
	// The root's block and the files' (which may cross one boundary of
	// the 1024-number blocks).
	if keys > 2 {
		t.Errorf("%d creates counted in %d inode-count keys, want at most 2", n, keys)
	}
	if got, err := s.Statfs(ctx); err != nil || got != n+1 {
		t.Fatalf("statfs: %d inodes, %v; want %d", got, err, n+1)
	}
	for i := range n / 2 {
		if err := s.Unlink(ctx, meta.RootIno, fmt.Sprintf("f%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := s.Statfs(ctx); err != nil || got != n/2+1 {
		t.Fatalf("statfs after removes: %d inodes, %v; want %d", got, err, n/2+1)
	}
}
