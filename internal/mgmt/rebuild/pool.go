package rebuild

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"poolfs/internal/clustermap"
	"poolfs/internal/erasure"
	"poolfs/internal/meta"
	"poolfs/internal/recovery"
	"poolfs/internal/storage"
)

// pool scans one pool, plans, and runs the plan's tasks until they are
// done or the pool's drive states change.
func (c *Coordinator) pool(ctx context.Context, m *clustermap.Map, pool *clustermap.Pool) (bool, error) {
	scanStart := time.Now()
	stripes, recs, err := c.Scan(ctx, pool)
	if err != nil {
		return false, err
	}
	scanSec := time.Since(scanStart).Seconds()
	in, perr := planInput(m, pool, stripes)
	if perr != nil && in.Up == nil {
		return false, perr
	}
	plan := recovery.Make(in)
	h := recovery.Check(in)
	c.reportLost(ctx, pool.ID, plan.Unrecoverable)
	reason := incompleteReason(pool, in, plan, perr)
	c.mu.Lock()
	pr := c.poolLocked(pool.ID)
	if sig := StateSig(m, pool); sig != pr.sig {
		pr.sig, pr.stuck = sig, false // new drive states: a new story
	}
	st := &pr.st
	st.PoolName, st.Epoch, st.Stripes, st.ScanSec = pool.Name, m.Epoch, h.Stripes, scanSec
	st.Scanned = scanStart.UnixNano()
	st.Degraded, st.Critical, st.Misplaced, st.Blocked = h.Degraded, h.Critical, h.Misplaced, len(plan.Blocked)
	st.Unavailable, st.Waiting, st.LostStripes = h.Unavailable, len(plan.Waiting), len(plan.Unrecoverable)
	st.Incomplete, st.LastError = reason, ""
	wasActive := st.Active
	announce := reason != "" && reason != pr.announced && !wasActive && len(plan.Tasks) == 0
	if announce || reason == "" {
		pr.announced = reason
	}
	c.mu.Unlock()
	if len(plan.Tasks) == 0 {
		switch {
		case wasActive:
			c.finishRun(ctx, pool, reason)
		case announce:
			c.event(ctx, EventIncomplete, pool, fmt.Sprintf("epoch %d: not every stripe can be restored: %s", m.Epoch, reason), 0)
		}
		return false, nil
	}
	kind := "rebalance"
	if plan.ByLost()[0] < len(plan.Tasks) {
		kind = "rebuild"
	}
	var total int64
	recByKey := map[[2]uint64]meta.StripeRec{}
	for i, st := range stripes {
		recByKey[[2]uint64{st.Ino, st.Stripe}] = recs[i]
	}
	for _, t := range plan.Tasks {
		r := recByKey[[2]uint64{t.Stripe.Ino, t.Stripe.Stripe}]
		total += int64((len(t.Sources) + len(t.Targets)) * erasure.FragmentSize(int(r.ShardSize)))
	}
	c.mu.Lock()
	if !st.Active {
		st.Active, st.Kind, st.Started = true, kind, time.Now().UnixNano()
		st.Priority, st.Depth, st.MaxTasks, st.BusyShare = "", 0, 0, 0
		retry := pr.stuck
		c.mu.Unlock()
		ev := EventStart
		if kind == "rebalance" {
			ev = EventRebalance
		}
		msg := fmt.Sprintf("epoch %d: %d stripes to restore (%d critical, %d degraded, %d to move), %s",
			m.Epoch, len(plan.Tasks), h.Critical, h.Degraded, plan.ByLost()[0], HumanBytes(total))
		if retry { // the last run's tasks all failed: its retries are not news
			c.d.Log.Info("rebuild retried", "pool", pool.Name, "msg", msg)
		} else {
			c.event(ctx, ev, pool, msg, 0)
		}
		c.saveRun(ctx, pool.ID, Record{Kind: kind, Started: st.Started})
		c.mu.Lock()
	} else if kind == "rebuild" {
		st.Kind = kind
	}
	st.Tasks, st.Done, st.Skipped, st.Failed, st.Bytes, st.BytesDone = len(plan.Tasks), 0, 0, 0, total, 0
	c.mu.Unlock()

	waiting, err := c.queuedDeletes(ctx)
	if err != nil {
		return false, err
	}
	deferredTasks := 0

	// Run until done or until drive states change (then plan again).
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	sig := StateSig(m, pool)
	changed := false
	go func() {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-runCtx.Done():
				return
			case <-t.C:
				if m2, err := c.d.Maps.Map(runCtx); err == nil {
					if p2, err := m2.Pool(pool.ID); err == nil && StateSig(m2, p2) != sig {
						c.d.Log.Info("drive states changed during a rebuild: planning again", "epoch", m2.Epoch)
						c.mu.Lock()
						changed = true
						c.mu.Unlock()
						cancel()
						return
					}
				}
			}
		}
	}()
	limits := func() recovery.Limits {
		lvl := 2
		if m2, err := c.d.Maps.Map(runCtx); err == nil {
			if p2, err := m2.Pool(pool.ID); err == nil {
				lvl, _ = clustermap.ParsePriority(p2.RebuildPriority)
			}
		}
		pol := clustermap.RebuildPolicyAt(lvl, len(in.Up), pool.K)
		c.mu.Lock()
		st := &c.poolLocked(pool.ID).st
		st.Priority, st.Depth, st.MaxTasks, st.BusyShare = clustermap.Priorities[lvl], pol.Depth, pol.MaxTasks, pol.BusyShare
		c.mu.Unlock()
		return recovery.Limits{Depth: pol.Depth, Max: pol.MaxTasks}
	}
	do := func(ctx context.Context, t *recovery.Task) error {
		c.mu.Lock()
		st := &c.poolLocked(pool.ID).st
		st.Running++
		share := st.BusyShare
		c.mu.Unlock()
		if waiting.blocks(t) {
			c.mu.Lock()
			deferredTasks++
			c.mu.Unlock()
			return errDeleteWaits
		}
		return c.runTask(ctx, m, pool, in, recByKey[[2]uint64{t.Stripe.Ino, t.Stripe.Stripe}], t, share)
	}
	done := func(t *recovery.Task, err error) {
		r := recByKey[[2]uint64{t.Stripe.Ino, t.Stripe.Stripe}]
		fs := int64(erasure.FragmentSize(int(r.ShardSize)))
		c.mu.Lock()
		defer c.mu.Unlock()
		st, io := &c.poolLocked(pool.ID).st, &c.mu.io
		st.Running--
		st.BytesDone += int64(len(t.Sources)+len(t.Targets)) * fs
		switch {
		case errors.Is(err, meta.ErrConflict):
			st.Skipped++
		case err != nil:
			st.Failed++
			st.LastError = err.Error()
			return
		default:
			st.Done++
			for _, src := range t.Sources {
				io.DriveIO[src.Drive.String()] += fs
				io.DriveReads[src.Drive.String()] += fs
			}
			for _, d := range t.Targets {
				io.DriveIO[d.String()] += fs
				io.DriveWrites[d.String()] += fs
			}
		}
		switch {
		case t.Lost == pool.M && t.Lost > 0:
			st.Critical = max(0, st.Critical-1)
		case t.Lost > 0:
			st.Degraded = max(0, st.Degraded-1)
		default:
			st.Misplaced = max(0, st.Misplaced-1)
		}
	}
	if err := recovery.Run(runCtx, plan.Tasks, limits, do, done); err != nil && ctx.Err() != nil {
		return false, ctx.Err()
	}
	// A pass in which every task failed would fail the same way at once:
	// the run ends, incomplete, and is tried again at the next interval or
	// drive state change.
	c.mu.Lock()
	stuck := !changed && st.Failed > 0 && st.Done+st.Skipped == 0
	if stuck {
		why := fmt.Sprintf("%d of %d tasks failed, the last with: %s", st.Failed, st.Tasks, st.LastError)
		if reason != "" {
			why = reason + "; " + why
		}
		st.Incomplete = why
	}
	why := st.Incomplete
	c.mu.Unlock()
	if stuck {
		c.finishStuck(ctx, pool, why)
		return false, nil
	}
	// Tasks deferred for deletes waiting in the GC queue (pending.go) run
	// at a later pass; passes back to back would find them waiting
	// still, until the collector's next run.
	c.mu.Lock()
	onlyDeferred := deferredTasks > 0 && st.Done == 0
	c.mu.Unlock()
	return !onlyDeferred, nil
}

// runTask executes one task on the storage server owning its first target,
// its I/O limited to share of busy drives' time, and records the new
// locations with compare-and-set on the generation.
func (c *Coordinator) runTask(ctx context.Context, m *clustermap.Map, pool *clustermap.Pool, in recovery.Input, rec meta.StripeRec, t *recovery.Task, share float64) error {
	sc, err := c.d.Servers.Server(m, t.Targets[0])
	if err != nil {
		return err
	}
	k, par := rec.Scheme(pool.K) // the stripe's own scheme: a small file's mirror, a narrow layout
	a := &storage.ReconstructArgs{Ino: t.Stripe.Ino, Stripe: t.Stripe.Stripe, Gen: t.Stripe.Gen, K: k, M: par,
		Pool: pool.ID, StripeLen: rec.Len, ShardSize: rec.ShardSize, Share: share}
	for _, src := range t.Sources {
		a.Sources = append(a.Sources, storage.FragmentAt{Index: src.Index, Drive: src.Drive})
	}
	if !t.Copy() {
		// Fallbacks: the other readable fragments, should a source fail.
		for i, d := range t.Stripe.Drives {
			if in.Up[d] && !slices.ContainsFunc(t.Sources, func(x recovery.Source) bool { return x.Index == i }) {
				a.Sources = append(a.Sources, storage.FragmentAt{Index: i, Drive: d})
			}
		}
	}
	for j, i := range t.Indexes {
		a.Targets = append(a.Targets, storage.FragmentAt{Index: i, Drive: t.Targets[j]})
	}
	if _, err := sc.Reconstruct(ctx, a); err != nil {
		return fmt.Errorf("stripe %v: %w", t.Stripe, err)
	}
	nd := t.NewDrives()
	drives := make([]uint32, len(nd))
	for i, d := range nd {
		drives[i] = uint32(d)
	}
	return c.d.Store.ReplaceStripeDrives(ctx, meta.Ino(t.Stripe.Ino), t.Stripe.Stripe, t.Stripe.Gen, drives)
}
