package client

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"poolfs/internal/chunkstore/drivetest"
	"poolfs/internal/clustermap"
	"poolfs/internal/meta"
)

// fakeQueue is the collector's queue as the gate reads it: items of one
// fragment each of shard bytes on drive 0 or drive 1.
type fakeQueue struct {
	mu    sync.Mutex
	items []meta.GCItem
	err   error
	reads int
}

// bytes is meta.Store.GCBytes over q.
func (q *fakeQueue) bytes(_ context.Context, limit int) (map[uint32]int64, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.reads++
	if q.err != nil {
		return nil, q.err
	}
	return meta.GCItemBytes(q.items[:min(limit, len(q.items))]), nil
}

func (q *fakeQueue) set(n int, drive uint32, shard uint32) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.items = q.items[:0]
	for i := range n {
		q.items = append(q.items, meta.GCItem{Seq: uint64(i), Drives: []uint32{drive, meta.NoDrive}, ShardSize: shard})
	}
}

// testGate is a gate of limit bytes over q, drive 1 down, with the read
// interval and the stall shortened.
func testGate(t *testing.T, q *fakeQueue, limit int64) *garbageGate {
	t.Helper()
	m := drivetest.Map(8, 4, 2, 64<<10, 1<<30)
	if _, err := m.SetState(1, clustermap.StateDown, time.Now()); err != nil {
		t.Fatal(err)
	}
	g := &garbageGate{bytes: q.bytes, maps: func(context.Context) (*clustermap.Map, error) { return m, nil },
		limit: limit, fresh: 10 * time.Millisecond, stall: 300 * time.Millisecond, held: &heldCounter{}}
	return g
}

// waitFor runs g.wait in the background and returns its result channel.
func waitFor(g *garbageGate, ctx context.Context) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- g.wait(ctx) }()
	return ch
}

// ended returns what the wait of done returned, failing with what if it
// has not returned within 5 s.
func ended(t *testing.T, done <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(5 * time.Second):
		t.Fatal(what)
		return nil
	}
}

func TestGarbageGate(t *testing.T) {
	ctx := context.Background()
	t.Run("within the limit", func(t *testing.T) {
		q := &fakeQueue{}
		q.set(10, 0, 100) // 1000 bytes
		g := testGate(t, q, 1000)
		if err := g.wait(ctx); err != nil {
			t.Fatal(err)
		}
		if h := g.held.load(); h != (Held{}) {
			t.Fatalf("a writer that did not wait was counted: %+v", h)
		}
	})
	t.Run("waits while the collector shrinks the queue", func(t *testing.T) {
		q := &fakeQueue{}
		q.set(20, 0, 100)
		g := testGate(t, q, 1000)
		done := waitFor(g, ctx)
		// The collector deletes an item every 50 ms: the queue shrinks
		// within the stall, so the writer keeps waiting until it is
		// within the limit (10 items: 500 ms).
		start := time.Now()
		for n := 19; n >= 10; n-- {
			select {
			case err := <-done:
				t.Fatalf("returned (%v) with %d items queued, over the limit", err, n+1)
			case <-time.After(50 * time.Millisecond):
			}
			q.set(n, 0, 100)
		}
		if err := ended(t, done, "still waiting with the queue within the limit"); err != nil {
			t.Fatal(err)
		}
		d := time.Since(start)
		if d < 400*time.Millisecond {
			t.Fatalf("waited %v, the queue took 500 ms to shrink", d)
		}
		if h := g.held.load(); h.Waits != 1 || h.Wait < 400*time.Millisecond || h.Wait > d {
			t.Fatalf("counted %+v for one wait of %v", h, d)
		}
	})
	t.Run("a collector that deletes nothing holds no writer", func(t *testing.T) {
		q := &fakeQueue{}
		q.set(20, 0, 100)
		g := testGate(t, q, 1000)
		start := time.Now()
		if err := g.wait(ctx); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d < g.stall {
			t.Fatalf("gave up after %v, before the stall (%v)", d, g.stall)
		}
		// The queue has not shrunk since: the next writer goes at once.
		start = time.Now()
		if err := g.wait(ctx); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > g.stall/2 {
			t.Fatalf("a second writer waited %v for a stalled collector", d)
		}
	})
	t.Run("fragments on drives that are down do not count", func(t *testing.T) {
		q := &fakeQueue{}
		q.set(100, 1, 100) // drive 1 is down: they stay queued
		g := testGate(t, q, 1000)
		start := time.Now()
		if err := g.wait(ctx); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > g.stall/2 {
			t.Fatalf("waited %v for fragments on a down drive", d)
		}
		if b, limit, ok := g.count(ctx); !ok || b != 0 || limit != 1000 {
			t.Fatalf("count = %d, limit %d, %v; want 0 (all on the down drive), 1000", b, limit, ok)
		}
		q.set(100, 0, 100)
		if b, _, ok := g.count(ctx); !ok || b != 100*100 {
			t.Fatalf("count = %d, %v; want %d", b, ok, 100*100)
		}
	})
	t.Run("small drives lower the limit", func(t *testing.T) {
		q := &fakeQueue{}
		q.set(20, 0, 1000) // 20000 bytes
		g := testGate(t, q, 1<<30)
		// 7 drives up of 64 KiB: a 32nd of 448 KiB is 14336 bytes.
		m := drivetest.Map(8, 4, 2, 64<<10, 64<<10)
		if _, err := m.SetState(1, clustermap.StateDown, time.Now()); err != nil {
			t.Fatal(err)
		}
		g.maps = func(context.Context) (*clustermap.Map, error) { return m, nil }
		if _, limit, ok := g.count(ctx); !ok || limit != 7*64<<10/32 {
			t.Fatalf("limit %d (%v), want %d", limit, ok, 7*64<<10/32)
		}
		done := waitFor(g, ctx)
		select {
		case err := <-done:
			t.Fatalf("returned (%v) with 20000 bytes queued on drives of 64 KiB", err)
		case <-time.After(100 * time.Millisecond):
		}
		q.set(14, 0, 1000)
		if err := ended(t, done, "still waiting with the queue within a 32nd of the drives"); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("drain waits for the collector once while it does not come", func(t *testing.T) {
		q := &fakeQueue{}
		q.set(20, 0, 100)
		g := testGate(t, q, 1<<30)
		start := time.Now()
		if g.drain(ctx) {
			t.Fatal("drain reported room freed by a collector that deleted nothing")
		}
		if d := time.Since(start); d < g.stall {
			t.Fatalf("drain gave up after %v, before the stall (%v)", d, g.stall)
		}
		start = time.Now()
		if g.drain(ctx) {
			t.Fatal("second drain reported room freed")
		}
		if d := time.Since(start); d > g.stall/2 {
			t.Fatalf("a second drain over the same queue waited %v", d)
		}
		// The collector comes back: the next drain waits while it deletes.
		q.set(15, 0, 100)
		done := make(chan bool, 1)
		go func() { done <- g.drain(ctx) }()
		time.Sleep(50 * time.Millisecond)
		q.set(5, 0, 100)
		select {
		case ok := <-done:
			if !ok {
				t.Fatal("drain over a queue the collector halved reported no room")
			}
		case <-time.After(5 * time.Second):
			t.Fatal("drain still waiting with the queue halved")
		}
		if g.drain(ctx) {
			t.Fatal("drain over a queue that no longer shrinks reported room")
		}
	})
	t.Run("a store that cannot say holds no writer", func(t *testing.T) {
		q := &fakeQueue{err: errors.New("unknown method meta.GCBytes")}
		if err := testGate(t, q, 1).wait(ctx); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("the context ends the wait", func(t *testing.T) {
		q := &fakeQueue{}
		q.set(20, 0, 100)
		g := testGate(t, q, 1000)
		g.stall = time.Hour
		cctx, cancel := context.WithCancel(ctx)
		done := waitFor(g, cctx)
		time.Sleep(30 * time.Millisecond)
		cancel()
		if err := ended(t, done, "wait did not end with its context"); !errors.Is(err, context.Canceled) {
			t.Fatalf("wait = %v, want context.Canceled", err)
		}
		if h := g.held.load(); h.Waits != 1 || h.Wait < 30*time.Millisecond {
			t.Fatalf("counted %+v for a wait of 30 ms ended by its context", h)
		}
	})
	t.Run("one read for many writers", func(t *testing.T) {
		q := &fakeQueue{}
		q.set(1, 0, 100)
		g := testGate(t, q, 1000)
		g.fresh = time.Hour
		var wg sync.WaitGroup
		for range 50 {
			wg.Go(func() {
				if err := g.wait(ctx); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if q.reads != 1 {
			t.Fatalf("%d reads of the queue for 50 writers within its freshness", q.reads)
		}
	})
	var nilGate *garbageGate // GarbageLimit < 0
	if err := nilGate.wait(ctx); err != nil {
		t.Fatal(err)
	}
}
