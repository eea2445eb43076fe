package client_test

import (
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	"poolfs/internal/chunkstore"
	"poolfs/internal/client"
	"poolfs/internal/erasure"
	"poolfs/internal/meta"
	"poolfs/internal/placement"
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

// TestWriteWaitsForCollectorWhenDriveFull: right after a file's removal
// the pool's accounting has room for a new file of its size, but the
// drives still hold the removed file's fragments until the collector
// deletes them. A write that finds a drive full waits for the collector
// to shrink its queue and tries again, where it failed with ErrPoolFull.
func TestWriteWaitsForCollectorWhenDriveFull(t *testing.T) {
	const driveSize = 4 << 20
	conn := startSized(t, client.Options{StripesInFlight: 2, GarbageLimit: client.DefaultGarbageLimit}, driveSize)
	ctx := context.Background()
	_, limit, err := conn.Meta.PoolUsage(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	// A file of 55% of the drives' bytes, in whole stripes: two do not fit
	// on them, one fits in the pool's room.
	sb := testK * testUnit
	size := 8 * driveSize * 55 / 100 * testK / (testK + testM) / sb * sb
	if raw := size / testK * (testK + testM); raw > int(limit) {
		t.Fatalf("a file of %d raw bytes does not fit the pool's %d", raw, limit)
	}
	a, _ := written(t, conn, "a", size)
	if err := conn.Meta.Unlink(ctx, meta.RootIno, "a"); err != nil {
		t.Fatal(err)
	}
	a.Close()
	queued, err := conn.Meta.GCList(ctx, 0)
	if err != nil || len(queued) == 0 {
		t.Fatalf("nothing queued by the removal: %v", err)
	}
	// The collector comes by once a drive is full (B's writes then wait
	// for it), or after 10 s.
	full := func() bool {
		for _, d := range conn.Drives {
			if u, err := d.Stat(ctx); err == nil && u.Used > u.Capacity-int64(sb) {
				return true
			}
		}
		return false
	}
	collected := make(chan error, 1)
	go func() {
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && !full(); {
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(200 * time.Millisecond)
		seqs := make([]uint64, 0, len(queued))
		for _, it := range queued {
			for i, d := range it.Drives {
				key := erasure.FragmentKey{Ino: uint64(it.Ino), Stripe: it.Stripe, Gen: it.Gen, Index: uint8(i)}
				if err := conn.Drives[placement.DriveID(d)].DeleteFragment(ctx, key); err != nil && !errors.Is(err, chunkstore.ErrNotFound) {
					collected <- err
					return
				}
			}
			seqs = append(seqs, it.Seq)
		}
		collected <- conn.Meta.GCDone(ctx, seqs)
	}()
	b, ref := written(t, conn, "b", size)
	if err := <-collected; err != nil {
		t.Fatal(err)
	}
	if h := conn.Client.Held().Garbage; h.Waits == 0 {
		t.Fatalf("no write waited for the collector: %+v", h)
	}
	checkFile(t, fresh(conn), b.Attr().Ino, ref, "a file written where a removed one was")
}

// TestWriteWaitsForRoomTheCollectorFrees: the pool's limit counts the
// fragments waiting for the collector as used, so a pool that has no room
// now may have some once the collector has come by. A write that does not
// fit waits for the collector to shrink its queue and for the limit to
// rise, and goes on; with an empty queue it fails at once.
func TestWriteWaitsForRoomTheCollectorFrees(t *testing.T) {
	conn := startWith(t, client.Options{StripesInFlight: 2, GarbageLimit: client.DefaultGarbageLimit})
	ctx := context.Background()
	written(t, conn, "a", 1<<20)
	if err := conn.Meta.Unlink(ctx, meta.RootIno, "a"); err != nil {
		t.Fatal(err)
	}
	queued, err := conn.Meta.GCList(ctx, 0)
	if err != nil || len(queued) == 0 {
		t.Fatalf("nothing queued by the removal: %v", err)
	}
	used, limit, err := conn.Meta.PoolUsage(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	// No room now: the management service counts the queue as used.
	if err := conn.Meta.SetPoolLimit(ctx, 0, used+1); err != nil {
		t.Fatal(err)
	}
	// The collector comes by after 300 ms, and the limit is set again.
	go func() {
		time.Sleep(300 * time.Millisecond)
		seqs := make([]uint64, len(queued))
		for i, it := range queued {
			seqs[i] = it.Seq
		}
		if err := conn.Meta.GCDone(ctx, seqs); err != nil {
			t.Error(err)
		}
		if err := conn.Meta.SetPoolLimit(ctx, 0, limit); err != nil {
			t.Error(err)
		}
	}()
	start := time.Now()
	b, ref := written(t, conn, "b", 1<<20)
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Fatalf("the write took %v: it did not need the collector", d)
	}
	if h := conn.Client.Held().Garbage; h.Waits == 0 {
		t.Fatalf("no write waited for the collector: %+v", h)
	}
	checkFile(t, fresh(conn), b.Attr().Ino, ref, "a file written in room the collector freed")

	// With nothing queued, a write that does not fit fails at once.
	used, _, err = conn.Meta.PoolUsage(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.Meta.SetPoolLimit(ctx, 0, used+1); err != nil {
		t.Fatal(err)
	}
	c := create(t, conn, "c")
	start = time.Now()
	_, err = c.WriteAt(ctx, make([]byte, 1<<20), 0)
	if err == nil {
		err = c.Flush(ctx)
	}
	if !errors.Is(err, client.ErrPoolFull) {
		t.Fatalf("a write into a full pool with nothing queued: %v, want ErrPoolFull", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("ErrPoolFull took %v with nothing queued", d)
	}
}
