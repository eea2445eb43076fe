package cluster

import (
	"context"
	"slices"
	"testing"

	"poolfs/internal/meta"
)

// A client over the network reads the collector's queue (what its
// writes over committed generations wait on: client.Options.GarbageLimit)
// as the store holds it.
func TestRemoteGCList(t *testing.T) {
	c, conn := startTest(t, Config{Drives: 12, Unit: 64 << 10, GCBacklogOff: true})
	ctx := context.Background()
	put(t, conn, "/f", randBytes(t, 8*(64<<10)))
	put(t, conn, "/f", randBytes(t, 8*(64<<10))) // the first one's stripe goes to the queue
	want, err := c.Store.GCList(ctx, 0)
	if err != nil || len(want) == 0 {
		t.Fatalf("store queue: %v, %v", want, err)
	}
	for _, limit := range []int{0, -5, 1, 1 << 30} {
		got, err := conn.Meta.GCList(ctx, limit)
		if err != nil {
			t.Fatalf("GCList(%d): %v", limit, err)
		}
		w := want
		if limit == 1 {
			w = want[:1]
		}
		if !slices.EqualFunc(got, w, func(a, b meta.GCItem) bool {
			return a.Seq == b.Seq && a.Ino == b.Ino && a.Gen == b.Gen && slices.Equal(a.Drives, b.Drives) && a.ShardSize == b.ShardSize
		}) {
			t.Fatalf("GCList(%d) over the network = %+v, want %+v", limit, got, w)
		}
	}
}
