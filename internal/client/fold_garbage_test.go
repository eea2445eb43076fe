package client_test

import (
	"context"
	"maps"
	"testing"
	"time"

	"poolfs/internal/client"
)

// A fold replaces its stripe's generation, whose fragments go to the
// collector's queue: while the queue is over Options.GarbageLimit and
// the collector is shrinking it, the fold waits, and it goes on once the
// queue is within the limit, with the file's bytes intact.
func TestFoldWaitsForCollector(t *testing.T) {
	conn := startWith(t, client.Options{StripesInFlight: 2, DeltaBudget: 1 << 40, GarbageLimit: 1})
	ctx := context.Background()
	f, ref := written(t, conn, "f", 1<<20)
	ino := f.Attr().Ino

	// A rewrite of the first stripe queues its old generation: the queue
	// is over the limit of 1 byte.
	whole := make([]byte, testK*testUnit)
	for i := range whole {
		whole[i] = byte(i * 7)
	}
	if _, err := f.WriteAt(ctx, whole, 0); err != nil {
		t.Fatal(err)
	}
	copy(ref, whole)
	if err := f.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	queued, err := conn.Meta.GCList(ctx, 0)
	if err != nil || len(queued) == 0 {
		t.Fatalf("nothing queued by the rewrite: %v", err)
	}
	randomWrites(t, f, ref, 40, 8<<10)
	if ext, _ := deltaStats(t, conn, ino); ext == 0 {
		t.Fatal("no extents to fold")
	}
	gens := stripeGens(t, conn, ino)

	time.Sleep(200 * time.Millisecond) // past the gate's last read of the queue
	done := make(chan error, 1)
	go func() { done <- f.FoldAll(ctx) }()
	select {
	case err := <-done:
		t.Fatalf("fold ended (%v) with the collector's queue over the limit", err)
	case <-time.After(500 * time.Millisecond):
	}
	if now := stripeGens(t, conn, ino); !maps.Equal(now, gens) {
		t.Fatalf("a fold committed with the queue over the limit: %v, was %v", now, gens)
	}

	// The collector deletes what was queued: the fold goes on.
	seqs := make([]uint64, len(queued))
	for i, it := range queued {
		seqs[i] = it.Seq
	}
	if err := conn.Meta.GCDone(ctx, seqs); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("fold still waiting with the queue empty")
	}
	if ext, logs := deltaStats(t, conn, ino); ext != 0 || logs != 0 {
		t.Fatalf("after the fold: %d extents in %d logs", ext, logs)
	}
	// Held counts the folds' stripes that waited, the first at least the
	// 500 ms above.
	if h := conn.Client.Held().Garbage; h.Waits == 0 || h.Wait < 500*time.Millisecond {
		t.Fatalf("held for the collector: %+v", h)
	}
	checkFile(t, fresh(conn), ino, ref, "after a fold that waited for the collector")
}
