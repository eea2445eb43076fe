package cluster

import (
	"bytes"
	"context"
	"testing"
	"time"

	"poolfs/internal/client"
)

// TestCollectorRunsEarlyOnSmallDrives: with a GC interval of an hour, a
// queue of fewer than gcBacklog items holding a gcEarlyShare of the
// drives' capacity is collected within seconds. (On drives of 160 MiB,
// writers over committed generations waited a whole GC interval for
// every 6 stripes the collector was to delete.)
func TestCollectorRunsEarlyOnSmallDrives(t *testing.T) {
	c, conn := startTest(t, Config{Drives: 12, DriveSize: 64 << 20})
	ctx := context.Background()
	data := randBytes(t, 16<<20) // two stripes of 8+2, 20 MiB raw: over 768 MiB / 64
	for range 2 {
		if _, err := conn.Client.Put(ctx, "/f", bytes.NewReader(data), client.PutOptions{Size: int64(len(data))}); err != nil {
			t.Fatal(err)
		}
	}
	items, err := c.Store.GCList(ctx, 0)
	if err != nil || len(items) == 0 || len(items) >= gcBacklog {
		t.Fatalf("queue after replacing the file: %d items, %v; want some, fewer than %d", len(items), err, gcBacklog)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(items) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d items still queued 10 s after the file was replaced, with the GC interval an hour away", len(items))
		}
		time.Sleep(50 * time.Millisecond)
		if items, err = c.Store.GCList(ctx, 0); err != nil {
			t.Fatal(err)
		}
	}
}
