package client

import (
	"context"
	"sync"
	"time"

	"poolfs/internal/clustermap"
)

// garbageGate holds back the writes that make garbage: a stripe written
// over a committed generation (a fold of the delta log, a rewrite) sends
// the old generation to the collector's queue once committed. A writer
// faster than the collector (folds of random writes replace a stripe many
// times a second, and deleting a fragment costs the drives a hole punched
// in a segment) piled up over a GiB of old generations on the drives
// before they were deleted, and that much more space beyond the live data.
//
// So such a write first waits while the queue holds more than
// Options.GarbageLimit raw bytes on drives that are up (and at most a
// 32nd of their capacity: in a small pool, old generations that the limit
// allowed filled the drives to what writes may take, and folds and
// write-backs failed with "drive full"), for as long as
// the collector makes progress: the queue must have shrunk within
// garbageStall. A collector that deletes nothing (stopped, or waiting for
// drives that are down) holds no writer back; nor do fragments on drives
// that are not up, which stay queued until their drive answers. The
// queue's size is read from the metadata store (GCBytes, at most
// garbageScan items, summed per drive) at most every garbageFresh, by one caller at a time.
type garbageGate struct {
	bytes func(ctx context.Context, limit int) (map[uint32]int64, error)
	maps  func(ctx context.Context) (*clustermap.Map, error)
	limit int64
	fresh time.Duration // garbageFresh (tests shorten it)
	stall time.Duration // garbageStall
	held  *heldCounter  // counts the waits (Client.Held)
	mu    struct {
		sync.Mutex
		bytes    int64     // the queue's raw bytes on up drives, as last read
		limit    int64     // the limit then: g.limit, or less for small drives
		fetched  time.Time // when bytes was read
		shrunk   time.Time // when a read last found the queue smaller than the one before
		fetching chan struct{}
		gaveUp   int64 // the queue's bytes when a drain last gave up on it unshrunk (0: none)
	}
}

const (
	// garbageFresh is how long a read of the queue's size is used.
	garbageFresh = 100 * time.Millisecond
	// garbageStall is how long a queue over the limit may stay as large
	// or grow before writers stop waiting for the collector: several of
	// its rounds (a round deletes 32 items, 320 MiB of 8+2 stripes of
	// 1 MiB units, before the queue shrinks), even on slow drives.
	garbageStall = 5 * time.Second
	// garbageShare: the queue may hold at most this fraction (1/n) of the
	// up drives' capacity.
	garbageShare = 32
	// garbageScan bounds the queue items one read counts.
	garbageScan = 1024
	// DefaultGarbageLimit is Options.GarbageLimit's default.
	DefaultGarbageLimit = 512 << 20
)

// newGarbageGate returns the gate of limit bytes (nil: none, for a limit
// <= 0) over m's queue; its waits are counted in held.
func newGarbageGate(m Stripes, maps func(ctx context.Context) (*clustermap.Map, error), limit int64, held *heldCounter) *garbageGate {
	if limit <= 0 {
		return nil
	}
	bytes := func(ctx context.Context, n int) (map[uint32]int64, error) { return m.GCBytes(ctx, n) }
	return &garbageGate{bytes: bytes, maps: maps, limit: limit, fresh: garbageFresh, stall: garbageStall, held: held}
}

// wait returns once the collector's queue is within the limit, or the
// collector stopped shrinking it, or ctx ends (its error).
func (g *garbageGate) wait(ctx context.Context) error {
	if g == nil {
		return nil
	}
	var start time.Time
	for {
		bytes, limit, shrunk := g.read(ctx)
		if bytes <= limit || time.Since(shrunk) > g.stall {
			if !start.IsZero() {
				g.held.add(start)
			}
			return nil
		}
		if start.IsZero() {
			start = time.Now()
		}
		t := time.NewTimer(g.fresh / 2)
		select {
		case <-ctx.Done():
			t.Stop()
			g.held.add(start)
			return ctx.Err()
		case <-t.C:
		}
	}
}

// drain waits, after a write found the pool or a drive full, for the
// collector to delete what its queue holds on drives that are up: until
// the queue holds at most half what it held at first, or it has not shrunk
// for garbageStall (the collector runs every few seconds), or ctx ends. It
// reports whether the queue shrank, that is whether the write is worth
// trying again; a store that cannot say counts as an empty queue. (Right
// after a file's removal the pool's accounting has room for a new file
// that the drives get only once its fragments are deleted: such a write
// failed with "no space left on device".) Once a
// drain has given up on a queue that did not shrink, the next ones return
// at once until the queue is smaller than that: a collector that is not
// coming (a long interval, a stopped one) costs one wait, not one a write.
func (g *garbageGate) drain(ctx context.Context) bool {
	if g == nil {
		return false
	}
	// Counted afresh, not from what the gate read last: the fragments
	// that fill the drive may have been queued since.
	first, _, ok := g.count(ctx)
	if !ok || first == 0 {
		return false
	}
	g.mu.Lock()
	gaveUp := g.mu.gaveUp
	g.mu.Unlock()
	if gaveUp > 0 && first >= gaveUp {
		return false
	}
	start, last, shrunk := time.Now(), first, time.Now()
	defer g.held.add(start)
	for {
		t := time.NewTimer(g.fresh)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
		bytes, _, _ := g.read(ctx) // one fetch for all the writers waiting
		if bytes < last {
			last, shrunk = bytes, time.Now()
		}
		if bytes <= first/2 {
			g.mu.Lock()
			g.mu.gaveUp = 0
			g.mu.Unlock()
			return true
		}
		if time.Since(shrunk) > g.stall {
			if last == first {
				g.mu.Lock()
				g.mu.gaveUp = last
				g.mu.Unlock()
			}
			return last < first
		}
	}
}

// read returns the queue's size, the limit and when the queue last shrank,
// reading them again if older than g.fresh (one caller reads; the others
// wait for it).
func (g *garbageGate) read(ctx context.Context) (int64, int64, time.Time) {
	g.mu.Lock()
	for time.Since(g.mu.fetched) > g.fresh {
		if ch := g.mu.fetching; ch != nil {
			g.mu.Unlock()
			select {
			case <-ch:
			case <-ctx.Done():
				g.mu.Lock()
				defer g.mu.Unlock()
				return g.mu.bytes, g.mu.limit, g.mu.shrunk
			}
			g.mu.Lock()
			continue
		}
		ch := make(chan struct{})
		g.mu.fetching = ch
		g.mu.Unlock()
		bytes, limit, ok := g.count(ctx)
		g.mu.Lock()
		now := time.Now()
		if !ok {
			bytes, limit = 0, g.limit // a store that cannot say holds no writer back
		}
		if bytes < g.mu.bytes || g.mu.bytes <= limit {
			// Shrinking, or just over the limit: the collector gets
			// garbageStall to shrink it from here.
			g.mu.shrunk = now
		}
		g.mu.bytes, g.mu.limit, g.mu.fetched, g.mu.fetching = bytes, limit, now, nil
		close(ch)
	}
	defer g.mu.Unlock()
	return g.mu.bytes, g.mu.limit, g.mu.shrunk
}

// count reads the queue and sums the raw bytes of its fragments on drives
// that are up, and returns the limit: g.limit, or a garbageShare of the
// up drives' capacity if less; ok is false if the store or the map could
// not be read.
func (g *garbageGate) count(ctx context.Context) (bytes, limit int64, ok bool) {
	m, err := g.maps(ctx)
	if err != nil {
		return 0, 0, false
	}
	per, err := g.bytes(ctx, garbageScan)
	if err != nil {
		return 0, 0, false
	}
	bytes, capacity := m.OnUp(per)
	return bytes, min(g.limit, max(capacity/garbageShare, 1)), true
}
