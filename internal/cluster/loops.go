package cluster

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"poolfs/internal/meta"
	"poolfs/internal/mgmt"
)

// mgmtLoops runs the management service's periodic jobs until ctx ends:
// the fragment collector, the metadata store check, the failure detector
// (health, which runs svc.CheckDrives and whatever a node checks locally
// first), the pool limits and the rebuild coordinator. They are the same
// in `poolfs up` and `poolfs mgmt`.
type mgmtLoops struct {
	svc    *mgmt.Service
	store  *meta.Store
	log    *slog.Logger
	health func(context.Context)

	gc, metaCheck, healthEvery, rebuild time.Duration
	gcBacklogOff                        bool // Config.GCBacklogOff
}

// start starts the loops on goroutines counted by wg.
func (l mgmtLoops) start(ctx context.Context, wg *sync.WaitGroup) {
	l.collectLoop(ctx, wg)
	every(ctx, wg, l.metaCheck, l.checkStore)
	l.svc.UpdatePoolLimits(ctx) // what the drives can take, before the first pass of the limit loop
	every(ctx, wg, l.healthEvery, l.health)
	// Pool limits apart from the failure detector, so that a slow drive's
	// usage query never delays it.
	every(ctx, wg, l.healthEvery, l.svc.UpdatePoolLimits)
	wg.Add(1)
	go func() {
		defer wg.Done()
		l.svc.RunCoordinator(ctx, l.rebuild)
	}()
}

// every runs fn every interval on a goroutine counted by wg until ctx ends.
func every(ctx context.Context, wg *sync.WaitGroup, interval time.Duration, fn func(context.Context)) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				fn(ctx)
			}
		}
	}()
}

// gcBacklog is the GC queue length (replaced generations, each up to a
// stripe's fragments) that starts a collector pass before the GC interval
// has passed: a writer that replaces stripes fast (folds of the delta log,
// rewrites) leaves at most about that much garbage on the drives for
// longer than gcTick, not a GC interval's worth.
const (
	gcBacklog = 16
	gcTick    = 250 * time.Millisecond
	// gcEarlyShare: a queue holding raw bytes of at least this fraction
	// (1/n) of the up drives' capacity also starts a pass at the next
	// gcTick. That is half of what writers over committed generations let
	// it hold before they wait for the collector (package client,
	// garbage.go: a 32nd). On small drives fewer than gcBacklog stripes
	// reach that limit: in a pool of 12 drives of 160 MiB, merges of
	// random overwrites waited a whole GC interval for every 6 stripes.
	gcEarlyShare = 64
)

// collectLoop runs the collector every GC interval, and sooner, at the
// next gcTick, when the queue holds gcBacklog items or a gcEarlyShare of
// the drives' capacity (gcEarly).
func (l mgmtLoops) collectLoop(ctx context.Context, wg *sync.WaitGroup) {
	last := time.Now()
	every(ctx, wg, min(gcTick, l.gc), func(ctx context.Context) {
		if time.Since(last) < l.gc {
			if l.gcBacklogOff {
				return
			}
			if !l.gcEarly(ctx) {
				return
			}
		}
		l.collect(ctx)
		last = time.Now()
	})
}

// gcEarly reports whether the queue is worth a pass before the GC
// interval (collectLoop).
func (l mgmtLoops) gcEarly(ctx context.Context) bool {
	items, err := l.store.GCList(ctx, gcBacklog)
	if err != nil || len(items) == 0 {
		return false
	}
	if len(items) >= gcBacklog {
		return true
	}
	m, err := l.svc.Map(ctx)
	if err != nil {
		return false
	}
	bytes, capacity := m.OnUp(meta.GCItemBytes(items))
	return capacity > 0 && bytes*gcEarlyShare >= capacity
}

// collect is one pass of the fragment garbage collector.
func (l mgmtLoops) collect(ctx context.Context) {
	if rep, err := l.svc.GC(ctx, mgmt.GCArgs{}); err != nil {
		if ctx.Err() == nil { // not the process stopping
			l.log.Warn("gc", "err", err)
		}
	} else if rep.Fragments > 0 {
		l.log.Info("gc", "items", rep.Queued, "fragments", rep.Fragments)
	}
}

// checkStore checks the metadata store's integrity (every
// MetaCheckInterval); a failed check stops fragment deletion
// (mgmt.Service.CheckStore).
func (l mgmtLoops) checkStore(ctx context.Context) {
	if err := l.svc.CheckStore(ctx, true); err != nil && ctx.Err() == nil {
		l.log.Error("metadata store check", "err", err)
	}
}
