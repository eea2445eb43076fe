package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"poolfs/internal/erasure"
	"poolfs/internal/meta"
)

// spaceGate admits buffered writes against the pool's remaining room, so
// that a write the pool cannot hold fails at write(2) with ErrPoolFull
// instead of being accepted and lost at writeback (where only close or
// fsync could report it, and `echo x > f` never would).
//
// Every dirty stripe holds a reservation of the raw bytes it will add to
// its pool when committed (reserveFor); a write that would take the pool's
// usage plus this client's reservations past the pool's limit is refused
// before any byte is buffered. The pool's usage and limit come from the
// metadata store (the limit follows what the drives can still take:
// mgmt.Service.UpdatePoolLimits) and are fetched again in the background
// when older than spaceFresh, and at once when a write would not fit. A
// committed reservation moves into the cached usage; a dropped one is
// given back.
type spaceGate struct {
	meta Stripes
	// freed waits for the collector to free room on the drives and
	// reports whether it did (garbageGate.drain).
	freed func(ctx context.Context) bool
	mu    struct {
		sync.Mutex
		pools map[uint32]*poolSpace
	}
}

type poolSpace struct {
	used, limit uint64 // as fetched, plus what this client committed since
	fetched     time.Time
	reserved    uint64 // raw bytes held by this client's dirty stripes
	refreshing  bool   // a background fetch is running
}

// spaceFresh is how long a fetched pool usage is trusted while writes fit.
const spaceFresh = time.Second

func newSpaceGate(m Stripes, freed func(ctx context.Context) bool) *spaceGate {
	g := &spaceGate{meta: m, freed: freed}
	g.mu.pools = map[uint32]*poolSpace{}
	return g
}

// reserve admits n more raw bytes of buffered writes to pool, or fails
// with ErrPoolFull. A write that fits the cached usage is admitted at once
// (a cache older than spaceFresh is fetched again in the background); one
// that does not, or the first of the pool, waits for a fresh fetch, which
// with wait false it does not do: it returns ErrWouldBlock instead. A
// write that does not fit the fresh usage either waits, if the collector's
// queue holds fragments, for the collector to delete them and the pool's
// limit to rise (room, below).
func (g *spaceGate) reserve(ctx context.Context, pool uint32, n uint64, wait bool) error {
	if n == 0 {
		return nil
	}
	var r room
	for fetched := false; ; fetched = true {
		g.mu.Lock()
		ps := g.poolLocked(pool)
		known := !ps.fetched.IsZero()
		if known && (ps.limit == 0 || ps.used+ps.reserved+n <= ps.limit) {
			ps.reserved += n
			g.refreshLocked(pool, ps)
			g.mu.Unlock()
			return nil
		}
		if fetched {
			used, limit, reserved := ps.used, ps.limit, ps.reserved
			g.mu.Unlock()
			if r.later(ctx, g.freed) {
				if err := g.fetch(ctx, pool); err != nil {
					return err
				}
				continue
			}
			return fmt.Errorf("%w: pool %d: %d of %d bytes used, %d buffered, a write needs %d more",
				ErrPoolFull, pool, used, limit, reserved, n)
		}
		g.mu.Unlock()
		if !wait {
			return ErrWouldBlock
		}
		if err := g.fetch(ctx, pool); err != nil {
			return err
		}
	}
}

// fetch reads pool's usage and limit from the metadata service.
func (g *spaceGate) fetch(ctx context.Context, pool uint32) error {
	used, limit, err := g.meta.PoolUsage(ctx, pool)
	if err != nil {
		return err
	}
	g.mu.Lock()
	ps := g.mu.pools[pool]
	ps.used, ps.limit, ps.fetched = used, limit, time.Now()
	g.mu.Unlock()
	return nil
}

// poolLocked returns pool's entry, made empty (not fetched) if new.
func (g *spaceGate) poolLocked(pool uint32) *poolSpace {
	ps := g.mu.pools[pool]
	if ps == nil {
		ps = &poolSpace{}
		g.mu.pools[pool] = ps
	}
	return ps
}

// refreshLocked starts a background fetch of pool's usage if ps is older
// than spaceFresh and none runs.
func (g *spaceGate) refreshLocked(pool uint32, ps *poolSpace) {
	if !ps.refreshing && time.Since(ps.fetched) >= spaceFresh {
		ps.refreshing = true
		go g.refresh(pool)
	}
}

// refresh is fetch in the background (one at a time per pool).
func (g *spaceGate) refresh(pool uint32) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = g.fetch(ctx, pool) // a failed refresh leaves the cache; the next write tries again
	g.mu.Lock()
	g.mu.pools[pool].refreshing = false
	g.mu.Unlock()
}

// free returns the raw bytes pool has left beyond its usage and what this
// client's dirty stripes hold, as last fetched; known is false for a pool
// without a limit or not fetched yet. A figure older than spaceFresh is
// fetched again in the background, as reserve does.
func (g *spaceGate) free(pool uint32) (free uint64, known bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	ps := g.poolLocked(pool)
	g.refreshLocked(pool, ps)
	if ps.fetched.IsZero() || ps.limit == 0 {
		return 0, false
	}
	return ps.limit - min(ps.limit, ps.used+ps.reserved), true
}

// grew counts n raw bytes committed to pool without a reservation (log
// stripes) in its cached usage, until the next fetch.
func (g *spaceGate) grew(pool uint32, n uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if ps := g.mu.pools[pool]; ps != nil && !ps.fetched.IsZero() {
		ps.used += n
	}
}

// done ends a reservation of n bytes of pool; committed ones now count as
// used.
func (g *spaceGate) done(pool uint32, n uint64, committed bool) {
	if n == 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	ps := g.mu.pools[pool]
	if ps == nil {
		return
	}
	ps.reserved -= min(n, ps.reserved)
	if committed {
		ps.used += n
	}
}

// stripeRaw is the raw bytes (shard size × fragments, as the metadata
// store counts them) of a stripe of l user bytes in layout lay.
func stripeRaw(lay meta.Layout, l int64) uint64 {
	if l <= 0 {
		return 0
	}
	return uint64(erasure.ShardSize(int(l), lay.K, int(lay.Unit))) * uint64(lay.K+lay.M)
}

// room is the wait of a write the pool has no room for, while the
// collector frees room that old fragments hold: the management service
// counts fragments waiting for the collector as used (mgmt's pool limits),
// so right after a file's removal, until the collector has deleted its
// fragments and the limit has been set again (every health interval, a
// second), a file of its size did not fit. roomPolls polls roomPoll apart
// follow one wait for the collector.
type room struct {
	freed bool
	polls int
}

const (
	roomPolls = 12
	roomPoll  = 250 * time.Millisecond
)

// later reports whether a write that found no room should look again: the
// first call waits for the collector (freed), the next ones roomPoll each,
// roomPolls in all, for the limit to rise.
func (r *room) later(ctx context.Context, freed func(ctx context.Context) bool) bool {
	if r.polls >= roomPolls {
		return false
	}
	if !r.freed {
		if !freed(ctx) {
			r.polls = roomPolls
			return false
		}
		r.freed = true
	}
	r.polls++
	return sleepCtx(ctx, roomPoll)
}

// sleepCtx waits for d and reports true, or false once ctx ends first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// withRoom runs commit again while it fails for want of room that the
// collector is freeing (room.later); it returns commit's last error.
func (c *Client) withRoom(ctx context.Context, commit func() error) error {
	var r room
	for {
		err := commit()
		if err == nil || !errors.Is(err, meta.ErrPoolFull) && !errors.Is(err, ErrPoolFull) || !r.later(ctx, c.garbage.drain) {
			return err
		}
	}
}
