package mgmt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"poolfs/internal/chunkstore"
	"poolfs/internal/clustermap"
	"poolfs/internal/erasure"
	"poolfs/internal/meta"
	"poolfs/internal/placement"
	"poolfs/internal/recovery"
	"poolfs/internal/rpc"
	"poolfs/internal/stripeio"
)

// ScrubStatus is the state of the scrubber: the running pass or the last
// one. Counts are of the current (or last) pass.
type ScrubStatus struct {
	Active   bool   `json:"active"`
	Pool     string `json:"pool,omitempty"`
	Started  int64  `json:"started,omitempty"`  // unix ns
	Finished int64  `json:"finished,omitempty"` // unix ns, 0 while running
	Stopped  bool   `json:"stopped,omitempty"`  // ended by `scrub stop`
	Priority string `json:"priority,omitempty"`
	// Stripes to check in this pass, and checked so far.
	Stripes int   `json:"stripes"`
	Checked int   `json:"checked"`
	Bytes   int64 `json:"bytes"` // fragment bytes read
	// Skipped stripes were rewritten, moved or had a fragment on a drive
	// that is not up while they were checked: rebuild owns those.
	Skipped int `json:"skipped"`
	// Bad counts fragments found missing, failing their CRCs or
	// inconsistent with the stripe's parity; Repaired those rewritten.
	Bad          int `json:"bad"`
	Missing      int `json:"missing"`
	Checksum     int `json:"checksum"`
	Inconsistent int `json:"inconsistent"`
	Repaired     int `json:"repaired"`
	// Unrecoverable stripes had fewer than k good fragments (or an
	// inconsistency that cannot be located): their files lost data.
	Unrecoverable []LostFile `json:"unrecoverable,omitempty"`
	Rate          float64    `json:"rate"` // bytes/s
	LastError     string     `json:"last_error,omitempty"`
}

// scrubber is the scrub state of a Service.
type scrubber struct {
	codecs stripeio.Codecs // one per stripe scheme met: a small file's mirror is 1+M, a narrow layout k'+m
	mu     struct {
		sync.Mutex
		st     ScrubStatus
		cancel context.CancelFunc // of the running pass, nil if none
		done   chan struct{}      // closed when the running pass ends
		halted bool               // the pass was ended by haltScrub
	}
}

func (s *Service) scrub() *scrubber {
	s.scrubOnce.Do(func() { s.sc = &scrubber{} })
	return s.sc
}

// ErrScrubRunning is returned by StartScrub while a pass runs.
var ErrScrubRunning = errors.New("mgmt: a scrub is already running")

// StartScrub starts a background pass over every committed stripe of pool
// (by name; "" is the first pool) and returns at once. It returns
// ErrScrubRunning if a pass runs. The pass reads all k+m fragments of each
// stripe, checks their CRCs and the stripe's parity, and rewrites bad or
// missing fragments in place on their drives. It runs at the pool's
// rebuild priority and ends with StopScrub or when the service's
// coordinator stops.
func (s *Service) StartScrub(ctx context.Context, pool string) error {
	m, err := s.Map(ctx)
	if err != nil {
		return err
	}
	if len(m.Pools) == 0 {
		return fmt.Errorf("%w: no pool to scrub", clustermap.ErrNoPool)
	}
	p := &m.Pools[0]
	if pool != "" {
		if p, err = m.PoolByName(pool); err != nil {
			return err
		}
	}
	return s.startScrub(ctx, p, nil)
}

// startScrub starts a pass over pool p, or carries on the one resume
// records (scrub_runs.go).
func (s *Service) startScrub(ctx context.Context, p *clustermap.Pool, resume *scrubRecord) error {
	sc := s.scrub()
	sc.mu.Lock()
	if sc.mu.cancel != nil {
		sc.mu.Unlock()
		return ErrScrubRunning
	}
	rec := scrubRecord{Pool: p.Name, Started: time.Now().UnixNano()}
	if resume != nil {
		rec = *resume
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	sc.mu.cancel, sc.mu.done, sc.mu.halted = cancel, make(chan struct{}), false
	sc.mu.st = ScrubStatus{Active: true, Pool: p.Name, Started: rec.Started}
	rec.scrubCounts.status(&sc.mu.st)
	done := sc.mu.done
	sc.mu.Unlock()
	if resume == nil {
		s.saveScrub(ctx, p.ID, rec, false)
	}
	pid := p.ID
	go func() {
		defer close(done)
		err := s.runScrub(rctx, pid, rec)
		failed := err != nil && rctx.Err() == nil
		cancel()
		sc.mu.Lock()
		halted := sc.mu.halted
		st := sc.mu.st
		sc.mu.Unlock()
		st.Active, st.Finished = false, time.Now().UnixNano()
		if failed {
			st.LastError = err.Error()
		}
		// The end is recorded before the status says the pass ended (and
		// before a new pass may start): whoever sees it inactive finds its
		// scrub.done event and no record left. A halted pass keeps its
		// record: the next coordinator carries it on.
		if !halted {
			s.saveScrub(context.Background(), pid, scrubRecord{}, true)
			s.event(context.Background(), EventScrubDone, "pool/"+p.Name, scrubSummary(&st), time.Duration(st.Finished-st.Started))
		}
		sc.mu.Lock()
		sc.mu.st.Active, sc.mu.st.Finished, sc.mu.st.LastError = false, st.Finished, st.LastError
		sc.mu.cancel = nil
		sc.mu.Unlock()
	}()
	return nil
}

func scrubSummary(st *ScrubStatus) string {
	how := "finished"
	if st.Stopped {
		how = "stopped"
	}
	msg := fmt.Sprintf("%s: %d of %d stripes checked (%s read), %d bad fragments (%d missing, %d checksum, %d inconsistent), %d repaired, %d files with unrecoverable stripes",
		how, st.Checked, st.Stripes, human(st.Bytes), st.Bad, st.Missing, st.Checksum, st.Inconsistent, st.Repaired, len(st.Unrecoverable))
	if st.LastError != "" {
		msg += "; error: " + st.LastError
	}
	return msg
}

// StopScrub ends the running pass, if any, and waits for it.
func (s *Service) StopScrub() {
	sc := s.scrub()
	sc.mu.Lock()
	cancel, done := sc.mu.cancel, sc.mu.done
	if cancel != nil {
		sc.mu.st.Stopped = true
	}
	sc.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// haltScrub ends the running pass, if any, as its coordinator ends, and
// waits for it: unlike StopScrub it keeps the pass's record, so the
// coordinator that runs next carries it on (scrub_runs.go).
func (s *Service) haltScrub() {
	sc := s.scrub()
	sc.mu.Lock()
	cancel, done := sc.mu.cancel, sc.mu.done
	if cancel != nil {
		sc.mu.halted = true
	}
	sc.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// Scrub returns the status of the running or last pass.
func (s *Service) Scrub() ScrubStatus {
	sc := s.scrub()
	sc.mu.Lock()
	defer sc.mu.Unlock()
	st := sc.mu.st
	st.Unrecoverable = slices.Clone(st.Unrecoverable)
	end := time.Now()
	if !st.Active && st.Finished != 0 {
		end = time.Unix(0, st.Finished)
	}
	if el := end.Sub(time.Unix(0, st.Started)).Seconds(); st.Started != 0 && el > 0 {
		st.Rate = float64(st.Bytes) / el
	}
	return st
}

// runScrub checks every stripe of pool pid in the PGs from rec.NextPG on,
// with the stripes in flight bounded by the pool's rebuild priority
// (re-read as the pass runs), recording its progress (scrub_runs.go).
func (s *Service) runScrub(ctx context.Context, pid uint32, rec scrubRecord) error {
	m, err := s.Map(ctx)
	if err != nil {
		return err
	}
	pool, err := m.Pool(pid)
	if err != nil {
		return err
	}
	stripes, recs, err := s.Scan(ctx, pool)
	if err != nil {
		return err
	}
	if rec.NextPG > 0 {
		from := 0
		for from < len(stripes) && stripes[from].PG < rec.NextPG {
			from++
		}
		stripes, recs = stripes[from:], recs[from:]
	}
	sc := s.scrub()
	sc.mu.Lock()
	sc.mu.st.Stripes = rec.Checked + len(stripes)
	sc.mu.Unlock()
	if rec.NextPG == 0 {
		s.event(ctx, EventScrubStart, "pool/"+pool.Name, fmt.Sprintf("epoch %d: %d stripes to check", m.Epoch, len(stripes)), 0)
	} else {
		s.event(ctx, EventScrubStart, "pool/"+pool.Name, fmt.Sprintf("epoch %d: resumed at PG %d of %d: %d stripes left to check", m.Epoch, rec.NextPG, pool.PGs, len(stripes)), 0)
	}
	prog := &scrubProgress{stripes: stripes, results: make([]scrubResult, len(stripes)), done: make([]bool, len(stripes)),
		committed: rec.scrubCounts}
	var pmu sync.Mutex // guards prog
	saved := rec
	checkpoint := func(ctx context.Context) {
		pmu.Lock()
		r := prog.record(rec, pool.PGs)
		pmu.Unlock()
		if r != saved {
			s.saveScrub(ctx, pid, r, false)
			saved = r
		}
	}
	stopCheckpoints := make(chan struct{})
	checkpoints := make(chan struct{})
	go func() {
		defer close(checkpoints)
		t := time.NewTicker(scrubCheckpoint)
		defer t.Stop()
		for {
			select {
			case <-stopCheckpoints:
				return
			case <-t.C:
				checkpoint(ctx)
			}
		}
	}()
	defer func() {
		close(stopCheckpoints)
		<-checkpoints
		checkpoint(context.WithoutCancel(ctx)) // what a halted pass resumes from
	}()
	if _, err := sc.codecs.Get(pool.K, pool.M); err != nil {
		return err
	}
	// Each stripe reads all k+m drives: keep about depth stripes per drive.
	limit := func() int {
		lvl := 2
		if m2, err := s.Map(ctx); err == nil {
			if p2, err := m2.Pool(pid); err == nil {
				lvl, _ = clustermap.ParsePriority(p2.RebuildPriority)
			}
		}
		depth, most := clustermap.RebuildLimits(lvl, len(pool.Drives), pool.K)
		n := max(1, depth*len(pool.Drives)/(pool.K+pool.M))
		if most > 0 {
			n = min(n, most)
		}
		sc.mu.Lock()
		sc.mu.st.Priority = clustermap.Priorities[lvl]
		sc.mu.Unlock()
		return n
	}
	lost := map[uint64][]uint64{}
	var lmu sync.Mutex
	sem := make(chan struct{}, 1024)
	var wg sync.WaitGroup
	n, at := limit(), time.Now()
	inflight := 0
	var imu sync.Mutex
	for i := range stripes {
		if time.Since(at) > 200*time.Millisecond {
			n, at = limit(), time.Now()
		}
		for {
			imu.Lock()
			ok := inflight < n
			if ok {
				inflight++
			}
			imu.Unlock()
			if ok || ctx.Err() != nil {
				break
			}
			select {
			case <-sem:
			case <-time.After(50 * time.Millisecond):
			}
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := s.scrubStripe(ctx, &sc.codecs, pool, stripes[i], recs[i])
			if ctx.Err() == nil { // a check cut short is done again on resumption
				pmu.Lock()
				prog.checked(i, r)
				pmu.Unlock()
			}
			sc.mu.Lock()
			st := &sc.mu.st
			st.Checked++
			st.Bytes += r.bytes
			st.Missing += r.missing
			st.Checksum += r.checksum
			st.Inconsistent += r.inconsistent
			st.Bad += r.missing + r.checksum + r.inconsistent
			st.Repaired += r.repaired
			if r.skipped {
				st.Skipped++
			}
			sc.mu.Unlock()
			if r.unrecoverable {
				lmu.Lock()
				lost[stripes[i].Ino] = append(lost[stripes[i].Ino], stripes[i].Stripe)
				lmu.Unlock()
			}
			imu.Lock()
			inflight--
			imu.Unlock()
			select {
			case sem <- struct{}{}:
			default:
			}
		}()
	}
	wg.Wait()
	if len(lost) > 0 {
		s.reportScrubLost(context.WithoutCancel(ctx), lost)
	}
	return ctx.Err()
}

func (s *Service) reportScrubLost(ctx context.Context, lost map[uint64][]uint64) {
	files := s.lostFileEvents(ctx, lost, "scrub: inode %d stripes %v cannot be restored: fewer than k good fragments")
	sc := s.scrub()
	sc.mu.Lock()
	sc.mu.st.Unrecoverable = files
	sc.mu.Unlock()
}

// scrubResult is what checking one stripe found.
type scrubResult struct {
	bytes                           int64
	missing, checksum, inconsistent int
	repaired                        int
	skipped, unrecoverable          bool
}

// scrubStripe reads every fragment of one stripe, classifies the bad ones
// and rewrites them, checking parity with the stripe's own scheme (for a
// mirror: that the copies agree; one differing copy is outvoted). A stripe
// that changed since the scan (rewritten, or moved by a rebuild) or has a
// fragment on a drive that is not up is skipped: the collector and the
// rebuild own those.
func (s *Service) scrubStripe(ctx context.Context, cds *stripeio.Codecs, pool *clustermap.Pool, st recovery.Stripe, rec meta.StripeRec) scrubResult {
	var r scrubResult
	k, par := rec.Scheme(pool.K)
	if k < 1 || par < 0 || k+par > pool.K+pool.M {
		r.skipped = true
		return r
	}
	cd, err := cds.Get(k, par)
	if err != nil {
		r.skipped = true
		return r
	}
	m, err := s.Map(ctx)
	if err != nil {
		r.skipped = true
		return r
	}
	for _, id := range rec.Drives {
		if d, err := m.Drive(placement.DriveID(id)); err != nil || d.State != clustermap.StateUp {
			r.skipped = true
			return r
		}
	}
	width, sz := k+par, int(rec.ShardSize)
	fs := &stripeio.Stripe{Ino: st.Ino, Stripe: st.Stripe, Gen: rec.Gen, K: k, M: par, Pool: pool.ID, Len: rec.Len, ShardSize: sz}
	at := stripeio.OnMap(s.drives, m)
	if len(rec.Drives) != width {
		r.skipped = true // not a record of this scheme: fsck's to report
		return r
	}
	f := &stripeio.Fetch{Stripe: fs, Need: width, At: at}
	for i, id := range rec.Drives {
		f.Sources = append(f.Sources, stripeio.Loc{Index: i, Drive: placement.DriveID(id)})
	}
	got, err := f.Get(ctx)
	if err != nil || ctx.Err() != nil {
		r.skipped = true
		return r
	}
	shards := got.Shards
	kinds := got.Errs // why fragment i is bad, nil if good
	var bad []int
	for i, e := range kinds {
		if e == nil {
			r.bytes += int64(erasure.FragmentSize(sz))
		} else {
			bad = append(bad, i)
		}
	}
	if len(bad) == 0 {
		if ok, err := cd.Verify(shards); err == nil && !ok {
			i, found := locateInconsistent(cd, shards)
			if !found {
				r.unrecoverable = s.stillCommitted(ctx, rec, st)
				r.inconsistent = 1
				return r
			}
			shards[i], kinds[i], bad = nil, errInconsistent, []int{i}
		}
	}
	if len(bad) == 0 {
		return r
	}
	if !s.stillCommitted(ctx, rec, st) {
		r.skipped = true
		return r
	}
	for _, i := range bad {
		switch {
		case errors.Is(kinds[i], errInconsistent):
			r.inconsistent++
		case errors.Is(kinds[i], chunkstore.ErrNotFound):
			r.missing++
		default:
			r.checksum++
		}
	}
	if len(bad) > par {
		r.unrecoverable = true
		return r
	}
	for _, i := range bad {
		shards[i] = nil
	}
	if err := stripeio.Reconstruct(cds, fs, shards, bad); err != nil {
		r.unrecoverable = true
		return r
	}
	targets := make([]stripeio.Loc, len(bad))
	frags := make([][]byte, len(bad))
	for j, i := range bad {
		targets[j], frags[j] = stripeio.Loc{Index: i, Drive: placement.DriveID(rec.Drives[i])}, stripeio.NewFragment(fs, shards[i])
	}
	for j, err := range stripeio.WriteFragments(ctx, at, fs, targets, frags) {
		i := bad[j]
		if err != nil {
			s.log.Warn("scrub repair failed", "stripe", st.String(), "index", i, "err", err)
			continue
		}
		s.log.Info("scrub repair", "stripe", st.String(), "index", i, "drive", placement.DriveID(rec.Drives[i]).String(), "cause", kinds[i])
		r.repaired++
	}
	return r
}

var errInconsistent = errors.New("mgmt: fragment inconsistent with the stripe's parity")

// locateInconsistent finds the one fragment whose replacement by a
// reconstruction from the others makes the stripe consistent. With m ≥ 2
// a single bad fragment is found; found is false otherwise.
func locateInconsistent(cd *erasure.Codec, shards [][]byte) (int, bool) {
	if cd.M() < 2 {
		return 0, false
	}
	hit, n := 0, 0
	for i := range shards {
		try := slices.Clone(shards)
		try[i] = nil
		if err := cd.Reconstruct(try, false); err != nil {
			continue
		}
		if ok, err := cd.Verify(try); err == nil && ok {
			hit, n = i, n+1
		}
	}
	return hit, n == 1
}

// stillCommitted reports whether the stripe still has generation
// st.Gen on the same drives (not rewritten or moved since the scan).
func (s *Service) stillCommitted(ctx context.Context, rec meta.StripeRec, st recovery.Stripe) bool {
	rs, err := s.store.Stripes(ctx, meta.Ino(st.Ino), st.Stripe, st.Stripe)
	return err == nil && len(rs) == 1 && rs[0].Gen == rec.Gen && slices.Equal(rs[0].Drives, rec.Drives)
}

// ScrubArgs are the arguments of mgmt.Scrub.
type ScrubArgs struct {
	Op   string `json:"op"` // start, stop or status
	Pool string `json:"pool,omitempty"`
	// Request is the call's id (requests.go): a repeated start gets the
	// first one's answer, not ErrScrubRunning.
	Request string `json:"request,omitempty"`
}

func (s *Service) registerScrub(r Handler) {
	r.Handle("mgmt.Scrub", func(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
		var a ScrubArgs
		if err := json.Unmarshal(req.Args, &a); err != nil {
			return nil, fmt.Errorf("%w: bad arguments: %v", meta.ErrInvalid, err)
		}
		switch a.Op {
		case "start":
			res, err := s.once(ctx, "mgmt.Scrub", a.Request, func() (any, error) {
				if err := s.StartScrub(ctx, a.Pool); err != nil {
					return nil, err
				}
				return s.Scrub(), nil
			})
			if err != nil {
				return nil, err
			}
			return &rpc.Response{Result: res}, nil
		case "stop":
			s.StopScrub()
		case "status":
		default:
			return nil, fmt.Errorf("%w: scrub %q: want start, stop or status", meta.ErrInvalid, a.Op)
		}
		return &rpc.Response{Result: s.Scrub()}, nil
	})
}

// Scrub starts (op "start"), stops ("stop") or reports ("status") the
// scrubber and returns its status.
func (c *Client) Scrub(ctx context.Context, op, pool string) (*ScrubStatus, error) {
	var st ScrubStatus
	a := ScrubArgs{Op: op, Pool: pool}
	if op == "start" {
		a.Request = newRequestID()
	}
	if err := c.rc.Call(ctx, "mgmt.Scrub", a, nil, &st); err != nil {
		return nil, err
	}
	return &st, nil
}
