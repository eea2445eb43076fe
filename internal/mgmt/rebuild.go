package mgmt

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"poolfs/internal/clustermap"
	"poolfs/internal/erasure"
	"poolfs/internal/meta"
	"poolfs/internal/placement"
	"poolfs/internal/recovery"
	"poolfs/internal/storage"
)

// RunCoordinator runs rebuild and rebalance until ctx ends: at start (so a
// rebuild interrupted by a restart resumes), whenever drive states change,
// and every interval (to catch stripes committed with an old map while a
// pass ran). It is the only goroutine that executes recovery tasks.
func (s *Service) RunCoordinator(ctx context.Context, interval time.Duration) {
	co := s.coord()
	defer s.haltScrub() // a scrub runs no longer than the coordinator; the next one carries it on
	s.resumeScrub(ctx)
	s.kickRebuild()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-co.kick:
		case <-t.C:
		}
		for ctx.Err() == nil {
			again, err := s.recoverOnce(ctx)
			if err != nil && ctx.Err() == nil {
				s.log.Warn("rebuild pass", "err", err)
				break
			}
			if !again {
				break
			}
		}
	}
}

// stateSig summarises the drive states of a pool: a plan is valid as long
// as it does not change.
func stateSig(m *clustermap.Map, p *clustermap.Pool) string {
	var b strings.Builder
	for _, id := range p.Drives {
		if d, err := m.Drive(id); err == nil {
			fmt.Fprintf(&b, "%v=%s,", id, d.State)
		}
	}
	return b.String()
}

// recoverOnce scans every pool, plans and runs one pass. again reports
// that work was done (or interrupted by a map change) and another pass
// should check the result.
func (s *Service) recoverOnce(ctx context.Context) (again bool, err error) {
	m, err := s.Map(ctx)
	if err != nil {
		return false, err
	}
	var errs []error
	for i := range m.Pools {
		pool := &m.Pools[i]
		a, err := s.recoverPool(ctx, m, pool)
		if err != nil {
			// One pool's trouble does not hold up the others.
			co := s.coord()
			co.mu.Lock()
			co.poolLocked(pool.ID).st.LastError = err.Error()
			co.mu.Unlock()
			errs = append(errs, fmt.Errorf("pool %q: %w", pool.Name, err))
		}
		again = again || a
	}
	return again, errors.Join(errs...)
}

// scanWorkers is how many PGs Scan reads at once: the metadata engines
// serve several readers, and a scan is thousands of small queries (one per
// PG), so it is bound by their round trips, not by one CPU.
const scanWorkers = 4

// Scan reads the committed stripes of every PG of a pool, in PG order. It
// is the input of the planner; a PG with no stripes costs one index lookup.
func (s *Service) Scan(ctx context.Context, pool *clustermap.Pool) ([]recovery.Stripe, []meta.StripeRec, error) {
	type pgStripes struct {
		st   []recovery.Stripe
		recs []meta.StripeRec
	}
	per := make([]pgStripes, pool.PGs)
	errs := make([]error, scanWorkers)
	var wg sync.WaitGroup
	for w := range scanWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for pg := w; pg < pool.PGs && errs[w] == nil; pg += scanWorkers {
				per[pg].st, per[pg].recs, errs[w] = s.scanPG(ctx, pool.ID, uint32(pg))
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	var out []recovery.Stripe
	var recs []meta.StripeRec
	for _, p := range per {
		out = append(out, p.st...)
		recs = append(recs, p.recs...)
	}
	return out, recs, nil
}

// scanPG reads the committed stripes of one PG.
func (s *Service) scanPG(ctx context.Context, pool, pg uint32) ([]recovery.Stripe, []meta.StripeRec, error) {
	var out []recovery.Stripe
	var recs []meta.StripeRec
	var after meta.StripeRef
	for {
		refs, err := s.store.ListPG(ctx, pool, pg, after, 1024)
		if err != nil {
			return nil, nil, err
		}
		for _, r := range refs {
			rs, err := s.store.Stripes(ctx, r.Ino, r.Stripe, r.Stripe)
			if err != nil && !errors.Is(err, meta.ErrNotFound) {
				return nil, nil, err
			}
			if len(rs) != 1 || rs[0].Gen != r.Gen {
				continue // rewritten or removed since the index was read
			}
			st := recovery.Stripe{Ino: uint64(r.Ino), Stripe: r.Stripe, Gen: r.Gen, PG: rs[0].PG, K: rs[0].K}
			for _, d := range rs[0].Drives {
				st.Drives = append(st.Drives, placement.DriveID(d))
			}
			out = append(out, st)
			recs = append(recs, rs[0])
		}
		if len(refs) < 1024 {
			return out, recs, nil
		}
		after = refs[len(refs)-1]
	}
}

// PlanInput builds the planner input of a pool at map m.
func PlanInput(m *clustermap.Map, pool *clustermap.Pool, stripes []recovery.Stripe) (recovery.Input, error) {
	in, err := planInput(m, pool, stripes)
	if err != nil {
		return recovery.Input{}, err
	}
	return in, nil
}

// planInput is PlanInput that, when the pool's placement cannot be
// computed (fewer drives up than a stripe is wide), still returns the
// input without PG sets alongside the error: enough to classify the
// stripes (recovery.Check) and find those lost (recovery.Make), though no
// task has a target.
func planInput(m *clustermap.Map, pool *clustermap.Pool, stripes []recovery.Stripe) (recovery.Input, error) {
	up, down := map[placement.DriveID]bool{}, map[placement.DriveID]bool{}
	for _, id := range pool.Drives {
		if d, err := m.Drive(id); err == nil && d.State == clustermap.StateUp {
			up[id] = true
		} else if err == nil && d.State == clustermap.StateDown {
			down[id] = true
		}
	}
	in := recovery.Input{K: pool.K, M: pool.M, Up: up, Down: down, Stripes: stripes}
	pp, err := m.Placement(pool.ID)
	if err != nil {
		return in, err
	}
	pm, err := pp.Map()
	if err != nil {
		return in, fmt.Errorf("placement of pool %q at epoch %d: %w", pool.Name, m.Epoch, err)
	}
	in.Sets = pm.Sets
	return in, nil
}

// incompleteReason says why a plan cannot restore every stripe of a pool,
// or "" if it can; perr is the placement error of planInput.
func incompleteReason(pool *clustermap.Pool, in recovery.Input, plan recovery.Plan, perr error) string {
	var parts []string
	switch {
	case errors.Is(perr, placement.ErrNotEnoughDrives):
		parts = append(parts, fmt.Sprintf("%d drives up, %d+%d stripes need %d: replace or add drives",
			len(in.Up), pool.K, pool.M, pool.K+pool.M))
	case perr != nil:
		parts = append(parts, perr.Error())
	case len(plan.Blocked) > 0:
		parts = append(parts, fmt.Sprintf("%d stripes have no free drive in their placement group: replace or add a drive",
			len(plan.Blocked)))
	}
	if n := len(plan.Unrecoverable); n > 0 {
		parts = append(parts, fmt.Sprintf("%d stripes lost more fragments than parity covers and cannot be restored", n))
	}
	return strings.Join(parts, "; ")
}

func (s *Service) recoverPool(ctx context.Context, m *clustermap.Map, pool *clustermap.Pool) (bool, error) {
	co := s.coord()
	scanStart := time.Now()
	stripes, recs, err := s.Scan(ctx, pool)
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
	s.reportLost(ctx, pool.ID, plan.Unrecoverable)
	reason := incompleteReason(pool, in, plan, perr)
	co.mu.Lock()
	pr := co.poolLocked(pool.ID)
	if sig := stateSig(m, pool); sig != pr.sig {
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
	co.mu.Unlock()
	if len(plan.Tasks) == 0 {
		switch {
		case wasActive:
			s.finishRun(ctx, pool, reason)
		case announce:
			s.event(ctx, EventRebuildIncomplete, "pool/"+pool.Name, fmt.Sprintf("epoch %d: not every stripe can be restored: %s", m.Epoch, reason), 0)
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
	co.mu.Lock()
	if !st.Active {
		st.Active, st.Kind, st.Started = true, kind, time.Now().UnixNano()
		st.Priority, st.Depth, st.MaxTasks, st.BusyShare = "", 0, 0, 0
		retry := pr.stuck
		co.mu.Unlock()
		ev := EventRebuildStart
		if kind == "rebalance" {
			ev = EventRebalance
		}
		msg := fmt.Sprintf("epoch %d: %d stripes to restore (%d critical, %d degraded, %d to move), %s",
			m.Epoch, len(plan.Tasks), h.Critical, h.Degraded, plan.ByLost()[0], human(total))
		if retry { // the last run's tasks all failed: its retries are not news
			s.log.Info("rebuild retried", "pool", pool.Name, "msg", msg)
		} else {
			s.event(ctx, ev, "pool/"+pool.Name, msg, 0)
		}
		s.saveRun(ctx, pool.ID, runRecord{Kind: kind, Started: st.Started})
		co.mu.Lock()
	} else if kind == "rebuild" {
		st.Kind = kind
	}
	st.Tasks, st.Done, st.Skipped, st.Failed, st.Bytes, st.BytesDone = len(plan.Tasks), 0, 0, 0, total, 0
	co.mu.Unlock()

	// Run until done or until drive states change (then plan again).
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	sig := stateSig(m, pool)
	changed := false
	go func() {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-runCtx.Done():
				return
			case <-t.C:
				if m2, err := s.Map(runCtx); err == nil {
					if p2, err := m2.Pool(pool.ID); err == nil && stateSig(m2, p2) != sig {
						s.log.Info("drive states changed during a rebuild: planning again", "epoch", m2.Epoch)
						co.mu.Lock()
						changed = true
						co.mu.Unlock()
						cancel()
						return
					}
				}
			}
		}
	}()
	limits := func() recovery.Limits {
		lvl := 2
		if m2, err := s.Map(runCtx); err == nil {
			if p2, err := m2.Pool(pool.ID); err == nil {
				lvl, _ = clustermap.ParsePriority(p2.RebuildPriority)
			}
		}
		pol := clustermap.RebuildPolicyAt(lvl, len(in.Up), pool.K)
		co.mu.Lock()
		st := &co.poolLocked(pool.ID).st
		st.Priority, st.Depth, st.MaxTasks, st.BusyShare = clustermap.Priorities[lvl], pol.Depth, pol.MaxTasks, pol.BusyShare
		co.mu.Unlock()
		return recovery.Limits{Depth: pol.Depth, Max: pol.MaxTasks}
	}
	do := func(ctx context.Context, t *recovery.Task) error {
		co.mu.Lock()
		st := &co.poolLocked(pool.ID).st
		st.Running++
		share := st.BusyShare
		co.mu.Unlock()
		return s.runTask(ctx, m, pool, in, recByKey[[2]uint64{t.Stripe.Ino, t.Stripe.Stripe}], t, share)
	}
	done := func(t *recovery.Task, err error) {
		r := recByKey[[2]uint64{t.Stripe.Ino, t.Stripe.Stripe}]
		fs := int64(erasure.FragmentSize(int(r.ShardSize)))
		co.mu.Lock()
		defer co.mu.Unlock()
		st, io := &co.poolLocked(pool.ID).st, &co.mu.io
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
	co.mu.Lock()
	stuck := !changed && st.Failed > 0 && st.Done+st.Skipped == 0
	if stuck {
		why := fmt.Sprintf("%d of %d tasks failed, the last with: %s", st.Failed, st.Tasks, st.LastError)
		if reason != "" {
			why = reason + "; " + why
		}
		st.Incomplete = why
	}
	why := st.Incomplete
	co.mu.Unlock()
	if stuck {
		s.finishStuck(ctx, pool, why)
		return false, nil
	}
	return true, nil
}

// runTask executes one task on the storage server owning its first target,
// its I/O limited to share of busy drives' time, and records the new
// locations with compare-and-set on the generation.
func (s *Service) runTask(ctx context.Context, m *clustermap.Map, pool *clustermap.Pool, in recovery.Input, rec meta.StripeRec, t *recovery.Task, share float64) error {
	if s.servers == nil {
		return fmt.Errorf("mgmt: cannot reach storage servers to rebuild")
	}
	sc, err := s.servers.Server(m, t.Targets[0])
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
	return s.store.ReplaceStripeDrives(ctx, meta.Ino(t.Stripe.Ino), t.Stripe.Stripe, t.Stripe.Gen, drives)
}

// finishStuck ends a run of a pool in which every task failed: it is
// tried again at the next interval or drive state change, and the retries
// that fail the same way are logged, not events.
func (s *Service) finishStuck(ctx context.Context, pool *clustermap.Pool, why string) {
	co := s.coord()
	co.mu.Lock()
	pr := co.poolLocked(pool.ID)
	again := pr.stuck
	if again {
		pr.st.Active, pr.st.Bytes, pr.st.BytesDone, pr.st.Running = false, 0, 0, 0
	}
	co.mu.Unlock()
	if again {
		s.log.Warn("rebuild retry failed", "pool", pool.Name, "why", why)
		return
	}
	s.finishRun(ctx, pool, why)
	co.mu.Lock()
	pr.stuck = true
	co.mu.Unlock()
}

// finishRun ends the run of a pool: done, or incomplete with the reason
// why not every stripe could be restored.
func (s *Service) finishRun(ctx context.Context, pool *clustermap.Pool, incomplete string) {
	co := s.coord()
	co.mu.Lock()
	pr := co.poolLocked(pool.ID)
	st := &pr.st
	dur := time.Since(time.Unix(0, st.Started))
	kind := st.Kind
	st.Active, st.LastSeconds = false, dur.Seconds()
	st.Bytes, st.BytesDone, st.Running = 0, 0, 0
	pr.announced, pr.stuck = incomplete, false
	co.mu.Unlock()
	s.saveRun(ctx, pool.ID, runRecord{})
	ev, msg := EventRebuildDone, fmt.Sprintf("%s finished in %s", kind, dur.Round(time.Millisecond))
	switch {
	case incomplete != "":
		ev, msg = EventRebuildIncomplete, fmt.Sprintf("%s ended after %s without restoring every stripe: %s", kind, dur.Round(time.Millisecond), incomplete)
	case kind == "rebalance":
		ev = EventRebalanceDone
	}
	s.event(ctx, ev, "pool/"+pool.Name, msg, dur)
}
