package mgmt

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"sort"
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

// LostFile is a file that lost data: more fragments of one of its stripes
// are gone than parity covers.
type LostFile struct {
	Ino     uint64   `json:"ino"`
	Path    string   `json:"path,omitempty"`
	Stripes []uint64 `json:"stripes"`
}

// RebuildStatus is the coordinator's view of recovery, for status and
// `poolfs rebuild watch`.
type RebuildStatus struct {
	Active   bool   `json:"active"`
	Kind     string `json:"kind,omitempty"` // rebuild or rebalance
	Pool     uint32 `json:"pool"`
	Epoch    uint64 `json:"epoch"`
	Started  int64  `json:"started,omitempty"` // unix ns of the current run
	Priority string `json:"priority"`
	// Depth is the reconstruct tasks allowed per drive at Priority, and
	// MaxTasks (0: none) the limit over the pool; BusyShare the largest
	// share of a drive's time rebuild takes while clients use the drive
	// (idle drives are taken whole at every priority).
	Depth     int     `json:"depth"`
	MaxTasks  int     `json:"max_tasks,omitempty"`
	BusyShare float64 `json:"busy_share,omitempty"`
	// Running is the number of tasks in flight.
	Running int `json:"running"`
	// Task counts of the current pass.
	Tasks   int `json:"tasks"`
	Done    int `json:"done"`
	Skipped int `json:"skipped"` // rewritten by a client meanwhile (CAS lost)
	Failed  int `json:"failed"`
	// Bytes to read and write in the current pass, and done so far.
	Bytes     int64   `json:"bytes"`
	BytesDone int64   `json:"bytes_done"`
	Rate      float64 `json:"rate"`    // bytes/s since the pass started
	ETA       float64 `json:"eta_sec"` // seconds, 0 when unknown
	// Stripe health at the last scan, updated as tasks finish.
	Stripes   int        `json:"stripes"`
	Degraded  int        `json:"degraded"`
	Critical  int        `json:"critical"`
	Misplaced int        `json:"misplaced"`
	Lost      []LostFile `json:"lost,omitempty"`
	Blocked   int        `json:"blocked"`
	// Unavailable stripes have a fragment on a down drive (not rebuilt
	// while it is down); Waiting ones also lost fragments and need a down
	// drive back to be rebuilt.
	Unavailable int `json:"unavailable,omitempty"`
	Waiting     int `json:"waiting,omitempty"`
	// DriveIO is the bytes each drive read or wrote for recovery since the
	// cluster started (the declustering figure: compare busiest and mean).
	DriveIO map[string]int64 `json:"drive_io,omitempty"`
	// DriveReads and DriveWrites split DriveIO into the bytes read (as a
	// source) and written (as a target).
	DriveReads  map[string]int64 `json:"drive_reads,omitempty"`
	DriveWrites map[string]int64 `json:"drive_writes,omitempty"`
	// ScanSec is how long the last scan of the stripes took (it is part of
	// every pass: the first plans, the last finds nothing left to do).
	ScanSec float64 `json:"scan_sec,omitempty"`
	// Last is the duration in seconds of the last finished run.
	LastSeconds float64 `json:"last_sec,omitempty"`
	LastError   string  `json:"last_error,omitempty"`
}

// Percent is the share of the current pass done.
func (r *RebuildStatus) Percent() float64 {
	if r.Bytes == 0 {
		if r.Active {
			return 0
		}
		return 100
	}
	return 100 * float64(r.BytesDone) / float64(r.Bytes)
}

// coordinator is the rebuild/rebalance state of a Service.
type coordinator struct {
	kick chan struct{}
	mu   struct {
		sync.Mutex
		st       RebuildStatus
		reported map[[2]uint64]bool // lost stripes already in the event log
		epochs   map[uint32]string  // pool -> drive-state signature of the plan running
	}
}

func (s *Service) coord() *coordinator {
	s.coordOnce.Do(func() {
		s.co = &coordinator{kick: make(chan struct{}, 1)}
		s.co.mu.reported = map[[2]uint64]bool{}
		s.co.mu.st.DriveIO = map[string]int64{}
		s.co.mu.st.DriveReads = map[string]int64{}
		s.co.mu.st.DriveWrites = map[string]int64{}
	})
	return s.co
}

// kickRebuild wakes the coordinator (drive states changed).
func (s *Service) kickRebuild() {
	select {
	case s.coord().kick <- struct{}{}:
	default:
	}
}

// Rebuild returns the coordinator's status.
func (s *Service) Rebuild() RebuildStatus {
	co := s.coord()
	co.mu.Lock()
	defer co.mu.Unlock()
	st := co.mu.st
	st.Lost = slices.Clone(st.Lost)
	st.DriveIO = maps.Clone(co.mu.st.DriveIO)
	st.DriveReads = maps.Clone(co.mu.st.DriveReads)
	st.DriveWrites = maps.Clone(co.mu.st.DriveWrites)
	if st.Active && st.Started != 0 {
		el := time.Since(time.Unix(0, st.Started)).Seconds()
		if el > 0 {
			st.Rate = float64(st.BytesDone) / el
		}
		if st.Rate > 0 {
			st.ETA = float64(st.Bytes-st.BytesDone) / st.Rate
		}
	}
	return st
}

// RunCoordinator runs rebuild and rebalance until ctx ends: at start (so a
// rebuild interrupted by a restart resumes), whenever drive states change,
// and every interval (to catch stripes committed with an old map while a
// pass ran). It is the only goroutine that executes recovery tasks.
func (s *Service) RunCoordinator(ctx context.Context, interval time.Duration) {
	co := s.coord()
	defer s.StopScrub() // a scrub runs no longer than the coordinator
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
				co.mu.Lock()
				co.mu.st.LastError = err.Error()
				co.mu.Unlock()
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
	for i := range m.Pools {
		a, err := s.recoverPool(ctx, m, &m.Pools[i])
		if err != nil {
			return false, err
		}
		again = again || a
	}
	return again, nil
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
	pp, err := m.Placement(pool.ID)
	if err != nil {
		return recovery.Input{}, err
	}
	pm, err := pp.Map()
	if err != nil {
		return recovery.Input{}, fmt.Errorf("placement of pool %q at epoch %d: %w", pool.Name, m.Epoch, err)
	}
	up, down := map[placement.DriveID]bool{}, map[placement.DriveID]bool{}
	for _, id := range pool.Drives {
		if d, err := m.Drive(id); err == nil && d.State == clustermap.StateUp {
			up[id] = true
		} else if err == nil && d.State == clustermap.StateDown {
			down[id] = true
		}
	}
	return recovery.Input{K: pool.K, M: pool.M, Sets: pm.Sets, Up: up, Down: down, Stripes: stripes}, nil
}

func (s *Service) recoverPool(ctx context.Context, m *clustermap.Map, pool *clustermap.Pool) (bool, error) {
	co := s.coord()
	scanStart := time.Now()
	stripes, recs, err := s.Scan(ctx, pool)
	if err != nil {
		return false, err
	}
	scanSec := time.Since(scanStart).Seconds()
	in, err := PlanInput(m, pool, stripes)
	if err != nil {
		return false, err
	}
	plan := recovery.Make(in)
	h := recovery.Check(in)
	s.reportLost(ctx, plan.Unrecoverable)
	co.mu.Lock()
	st := &co.mu.st
	st.Pool, st.Epoch, st.Stripes, st.ScanSec = pool.ID, m.Epoch, h.Stripes, scanSec
	st.Degraded, st.Critical, st.Misplaced, st.Blocked = h.Degraded, h.Critical, h.Misplaced, len(plan.Blocked)
	st.Unavailable, st.Waiting = h.Unavailable, len(plan.Waiting)
	wasActive := st.Active
	co.mu.Unlock()
	if len(plan.Tasks) == 0 {
		if wasActive {
			s.finishRun(ctx)
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
		co.mu.Unlock()
		ev := EventRebuildStart
		if kind == "rebalance" {
			ev = EventRebalance
		}
		s.event(ctx, ev, "pool/"+pool.Name, fmt.Sprintf("epoch %d: %d stripes to restore (%d critical, %d degraded, %d to move), %s",
			m.Epoch, len(plan.Tasks), h.Critical, h.Degraded, plan.ByLost()[0], human(total)), 0)
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
		st := &co.mu.st
		st.Priority, st.Depth, st.MaxTasks, st.BusyShare = clustermap.Priorities[lvl], pol.Depth, pol.MaxTasks, pol.BusyShare
		co.mu.Unlock()
		return recovery.Limits{Depth: pol.Depth, Max: pol.MaxTasks}
	}
	do := func(ctx context.Context, t *recovery.Task) error {
		co.mu.Lock()
		co.mu.st.Running++
		share := co.mu.st.BusyShare
		co.mu.Unlock()
		return s.runTask(ctx, m, pool, in, recByKey[[2]uint64{t.Stripe.Ino, t.Stripe.Stripe}], t, share)
	}
	done := func(t *recovery.Task, err error) {
		r := recByKey[[2]uint64{t.Stripe.Ino, t.Stripe.Stripe}]
		fs := int64(erasure.FragmentSize(int(r.ShardSize)))
		co.mu.Lock()
		defer co.mu.Unlock()
		st := &co.mu.st
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
				st.DriveIO[src.Drive.String()] += fs
				st.DriveReads[src.Drive.String()] += fs
			}
			for _, d := range t.Targets {
				st.DriveIO[d.String()] += fs
				st.DriveWrites[d.String()] += fs
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
	return true, nil
}

// runTask executes one task on the storage server owning its first target,
// its I/O limited to share of busy drives' time, and records the new
// locations with compare-and-set on the generation.
func (s *Service) runTask(ctx context.Context, m *clustermap.Map, pool *clustermap.Pool, in recovery.Input, rec meta.StripeRec, t *recovery.Task, share float64) error {
	sd, ok := s.drives.(serverDialer)
	if !ok {
		return fmt.Errorf("mgmt: cannot reach storage servers to rebuild")
	}
	sc, err := sd.Server(m, t.Targets[0])
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

func (s *Service) finishRun(ctx context.Context) {
	co := s.coord()
	co.mu.Lock()
	st := &co.mu.st
	dur := time.Since(time.Unix(0, st.Started))
	kind := st.Kind
	st.Active, st.LastSeconds = false, dur.Seconds()
	st.Bytes, st.BytesDone = 0, 0
	co.mu.Unlock()
	ev := EventRebuildDone
	if kind == "rebalance" {
		ev = EventRebalanceDone
	}
	s.event(ctx, ev, fmt.Sprintf("pool/%d", st.Pool), fmt.Sprintf("%s finished in %s", kind, dur.Round(time.Millisecond)), dur)
}

// reportLost logs, once per stripe, the files that lost data.
func (s *Service) reportLost(ctx context.Context, lost []recovery.Stripe) {
	co := s.coord()
	byIno := map[uint64][]uint64{}
	co.mu.Lock()
	for _, st := range lost {
		k := [2]uint64{st.Ino, st.Stripe}
		if !co.mu.reported[k] {
			co.mu.reported[k] = true
			byIno[st.Ino] = append(byIno[st.Ino], st.Stripe)
		}
	}
	co.mu.Unlock()
	if len(byIno) == 0 {
		return
	}
	files := s.lostFileEvents(ctx, byIno, "inode %d lost stripes %v: more fragments gone than parity covers")
	co.mu.Lock()
	co.mu.st.Lost = append(co.mu.st.Lost, files...)
	co.mu.Unlock()
}

// pathsOf finds the paths of some inodes by walking the namespace (only
// when data was lost, so the cost does not matter).
func (s *Service) pathsOf(ctx context.Context, want map[uint64][]uint64) map[uint64]string {
	out := map[uint64]string{}
	var walk func(dir meta.Ino, p string, depth int)
	walk = func(dir meta.Ino, p string, depth int) {
		if depth > 64 || len(out) == len(want) {
			return
		}
		after := ""
		for {
			ents, err := s.store.Readdir(ctx, dir, after, 1024)
			if err != nil {
				return
			}
			for _, e := range ents {
				if _, ok := want[uint64(e.Ino)]; ok {
					out[uint64(e.Ino)] = path.Join(p, e.Name)
				}
				if e.Type == meta.TypeDir {
					walk(e.Ino, path.Join(p, e.Name), depth+1)
				}
			}
			if len(ents) < 1024 {
				return
			}
			after = ents[len(ents)-1].Name
		}
	}
	walk(meta.RootIno, "/", 0)
	return out
}

func human(n int64) string {
	const u = "KMGTPE"
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	f, i := float64(n)/1024, 0
	for f >= 1024 && i < len(u)-1 {
		f /= 1024
		i++
	}
	return fmt.Sprintf("%.1f %ciB", f, u[i])
}

// lostFileEvents names the files of lost stripes (inode -> stripes), sorted,
// and writes a data.lost event for each with msg (format: inode, stripes).
func (s *Service) lostFileEvents(ctx context.Context, lost map[uint64][]uint64, msg string) []LostFile {
	paths := s.pathsOf(ctx, lost)
	var files []LostFile
	for ino, ss := range lost {
		sort.Slice(ss, func(i, j int) bool { return ss[i] < ss[j] })
		files = append(files, LostFile{Ino: ino, Path: paths[ino], Stripes: ss})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Ino < files[j].Ino })
	for _, f := range files {
		name := f.Path
		if name == "" {
			name = fmt.Sprintf("inode %d", f.Ino)
		}
		s.event(ctx, EventDataLost, name, fmt.Sprintf(msg, f.Ino, f.Stripes), 0)
	}
	return files
}
