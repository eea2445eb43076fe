package cluster

import (
	"context"
	"maps"
	"testing"

	"poolfs/internal/meta"
)

// A client over the network reads the collector's queue (what its
// writes over committed generations wait on: client.Options.GarbageLimit)
// as the store holds it, summed per drive.
func TestRemoteGCBytes(t *testing.T) {
	c, conn := startTest(t, Config{Drives: 12, Unit: 64 << 10, GCBacklogOff: true})
	ctx := context.Background()
	put(t, conn, "/f", randBytes(t, 8*(64<<10)))
	put(t, conn, "/f", randBytes(t, 8*(64<<10))) // the first one's stripe goes to the queue
	put(t, conn, "/g", randBytes(t, 3*(64<<10)))
	put(t, conn, "/g", randBytes(t, 3*(64<<10)))
	items, err := c.Store.GCList(ctx, 0)
	if err != nil || len(items) < 2 {
		t.Fatalf("store queue: %v, %v", items, err)
	}
	for _, limit := range []int{0, -5, 1, 1 << 30} {
		got, err := conn.Meta.GCBytes(ctx, limit)
		if err != nil {
			t.Fatalf("GCBytes(%d): %v", limit, err)
		}
		want := meta.GCItemBytes(items)
		if limit == 1 {
			want = meta.GCItemBytes(items[:1])
		}
		if len(want) == 0 || !maps.Equal(got, want) {
			t.Fatalf("GCBytes(%d) over the network = %v, want %v", limit, got, want)
		}
	}
}
