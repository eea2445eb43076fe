package scrub

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"poolfs/internal/clustermap"
	"poolfs/internal/meta"
	"poolfs/internal/recovery"
	"poolfs/internal/stripeio"
)

// Status is the state of the scheduler: the running pass or the last
// one. Counts are of the current (or last) pass.
type Status struct {
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
	Unrecoverable []recovery.LostFile `json:"unrecoverable,omitempty"`
	Rate          float64             `json:"rate"` // bytes/s
	LastError     string              `json:"last_error,omitempty"`
}

// Maps returns the current cluster map; the scheduler does not change it.
type Maps interface {
	Map(ctx context.Context) (*clustermap.Map, error)
}

// Scanner reads the committed stripes of every PG of a pool, in PG order,
// with their records (the rebuild coordinator's scan).
type Scanner interface {
	Scan(ctx context.Context, pool *clustermap.Pool) ([]recovery.Stripe, []meta.StripeRec, error)
}

// Stripes reads a file's committed stripe records (a *meta.Store does).
type Stripes interface {
	Stripes(ctx context.Context, ino meta.Ino, first, last uint64) ([]meta.StripeRec, error)
}

// Runs keeps the record of the pass under way, by pool ID in decimal.
type Runs interface {
	// Load returns every stored record.
	Load(ctx context.Context) (map[string]Record, error)
	// Set stores pool's record, or removes it (del).
	Set(ctx context.Context, pool string, r Record, del bool) error
}

// Events is told what a pass does, for the cluster's event log.
type Events interface {
	// Started: a pass began or was resumed over pool; msg says how much.
	Started(ctx context.Context, pool, msg string)
	// Done: a pass ended (finished or stopped; not halted); st is its
	// final status.
	Done(ctx context.Context, pool string, st Status)
	// Lost names the files of the stripes a pass could not restore (inode
	// → stripes), reports each, and returns them sorted by inode.
	Lost(ctx context.Context, lost map[uint64][]uint64) []recovery.LostFile
}

// Deps are a scheduler's dependencies, all required but Log (default:
// discard).
type Deps struct {
	Maps    Maps
	Scanner Scanner
	Stripes Stripes
	// Drives reaches every drive of the map, whatever its state, as a
	// storage dialer does.
	Drives stripeio.MapDrives
	Runs   Runs
	Events Events
	Log    *slog.Logger
}

// Scheduler runs scrub passes, one at a time.
type Scheduler struct {
	d      Deps
	codecs stripeio.Codecs // one per stripe scheme met: a small file's mirror is 1+M, a narrow layout k'+m
	mu     struct {
		sync.Mutex
		st     Status
		cancel context.CancelFunc // of the running pass, nil if none
		done   chan struct{}      // closed when the running pass ends
		halted bool               // the pass was ended by Halt
	}
}

// New returns a scheduler over d. It panics if a required dependency is
// missing: that is a wiring mistake.
func New(d Deps) *Scheduler {
	if d.Maps == nil || d.Scanner == nil || d.Stripes == nil || d.Drives == nil || d.Runs == nil || d.Events == nil {
		panic("scrub: New needs Maps, a Scanner, Stripes, Drives, Runs and Events")
	}
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	return &Scheduler{d: d}
}

// ErrRunning is returned by Start while a pass runs.
var ErrRunning = errors.New("mgmt: a scrub is already running")

// Start starts a background pass over every committed stripe of pool (by
// name; "" is the first pool) and returns at once. It returns ErrRunning
// if a pass runs, clustermap.ErrNoPool if there is no such pool.
func (s *Scheduler) Start(ctx context.Context, pool string) error {
	m, err := s.d.Maps.Map(ctx)
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
	return s.start(ctx, p, nil)
}

// start starts a pass over pool p, or carries on the one resume records
// (runs.go).
func (s *Scheduler) start(ctx context.Context, p *clustermap.Pool, resume *Record) error {
	s.mu.Lock()
	if s.mu.cancel != nil {
		s.mu.Unlock()
		return ErrRunning
	}
	rec := Record{Pool: p.Name, Started: time.Now().UnixNano()}
	if resume != nil {
		rec = *resume
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.mu.cancel, s.mu.done, s.mu.halted = cancel, make(chan struct{}), false
	s.mu.st = Status{Active: true, Pool: p.Name, Started: rec.Started}
	rec.Counts.status(&s.mu.st)
	done := s.mu.done
	s.mu.Unlock()
	if resume == nil {
		s.save(ctx, p.ID, rec, false)
	}
	pid, name := p.ID, p.Name
	go func() {
		defer close(done)
		err := s.run(rctx, pid, rec)
		failed := err != nil && rctx.Err() == nil
		cancel()
		s.mu.Lock()
		halted := s.mu.halted
		st := s.mu.st
		s.mu.Unlock()
		st.Active, st.Finished = false, time.Now().UnixNano()
		if failed {
			st.LastError = err.Error()
		}
		// The end is recorded before the status says the pass ended (and
		// before a new pass may start): whoever sees it inactive finds its
		// Done event and no record left. A halted pass keeps its record:
		// the next scheduler carries it on.
		if !halted {
			s.save(context.Background(), pid, Record{}, true)
			s.d.Events.Done(context.Background(), name, st)
		}
		s.mu.Lock()
		s.mu.st.Active, s.mu.st.Finished, s.mu.st.LastError = false, st.Finished, st.LastError
		s.mu.cancel = nil
		s.mu.Unlock()
	}()
	return nil
}

// Stop ends the running pass, if any, and waits for it.
func (s *Scheduler) Stop() {
	s.mu.Lock()
	cancel, done := s.mu.cancel, s.mu.done
	if cancel != nil {
		s.mu.st.Stopped = true
	}
	s.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// Halt ends the running pass, if any, as its coordinator ends, and waits
// for it: unlike Stop it keeps the pass's record, so the scheduler that
// runs next carries it on (Resume).
func (s *Scheduler) Halt() {
	s.mu.Lock()
	cancel, done := s.mu.cancel, s.mu.done
	if cancel != nil {
		s.mu.halted = true
	}
	s.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// Status returns the status of the running or last pass. The caller owns
// it.
func (s *Scheduler) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.mu.st
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
