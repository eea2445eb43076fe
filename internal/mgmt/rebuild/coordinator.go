package rebuild

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"poolfs/internal/clustermap"
	"poolfs/internal/meta"
	"poolfs/internal/placement"
	"poolfs/internal/recovery"
	"poolfs/internal/storage"
)

// Event kinds the coordinator reports (Events.Event).
const (
	EventStart         = "rebuild.start"
	EventDone          = "rebuild.done"
	EventIncomplete    = "rebuild.incomplete"
	EventRebalance     = "rebalance.start"
	EventRebalanceDone = "rebalance.done"
)

// Maps returns the current cluster map; the coordinator does not change it.
type Maps interface {
	Map(ctx context.Context) (*clustermap.Map, error)
}

// Store is the part of the metadata store the coordinator uses (a
// *meta.Store is one): the PG index and stripe records it scans, and the
// compare-and-set of a restored stripe's drives.
type Store interface {
	ListPG(ctx context.Context, pool, pg uint32, after meta.StripeRef, limit int) ([]meta.StripeRef, error)
	Stripes(ctx context.Context, ino meta.Ino, first, last uint64) ([]meta.StripeRec, error)
	ReplaceStripeDrives(ctx context.Context, ino meta.Ino, stripe, gen uint64, drives []uint32) error
	// GCList reads the GC queue (limit <= 0: all of it): a task does
	// not write a fragment whose delete waits there (pending.go).
	GCList(ctx context.Context, limit int) ([]meta.GCItem, error)
}

// Servers reaches the storage server that owns drive id in map m (a
// storage dialer does).
type Servers interface {
	Server(m *clustermap.Map, id placement.DriveID) (Server, error)
}

// Server runs reconstruct tasks (a *storage.ServerClient does).
type Server interface {
	Reconstruct(ctx context.Context, a *storage.ReconstructArgs) (*storage.ReconstructResult, error)
}

var _ Server = (*storage.ServerClient)(nil)

// Events is told what the coordinator does, for the cluster's event log.
type Events interface {
	// Event records one event of kind (the Event constants) about
	// subject ("pool/NAME"), dur long (0: not a span).
	Event(ctx context.Context, kind, subject, msg string, dur time.Duration)
	// Lost names the files of stripes newly found lost (inode → stripes),
	// reports each, and returns them sorted by inode.
	Lost(ctx context.Context, lost map[uint64][]uint64) []recovery.LostFile
}

// Deps are a coordinator's dependencies, all required but Log (default:
// discard).
type Deps struct {
	Maps    Maps
	Store   Store
	Servers Servers
	Runs    Runs
	Events  Events
	Log     *slog.Logger
}

// Coordinator plans and runs the rebuild and rebalance of every pool. Its
// methods are safe for concurrent use; only Run executes tasks.
type Coordinator struct {
	d    Deps
	kick chan struct{}
	mu   struct {
		sync.Mutex
		pools map[uint32]*poolState
		// io holds DriveIO, DriveReads and DriveWrites, over all pools.
		io          Status
		readRepairs int64
	}
}

// New returns a coordinator over d. It panics if a required dependency is
// missing: that is a wiring mistake.
func New(d Deps) *Coordinator {
	if d.Maps == nil || d.Store == nil || d.Servers == nil || d.Runs == nil || d.Events == nil {
		panic("rebuild: New needs Maps, a Store, Servers, Runs and Events")
	}
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	c := &Coordinator{d: d, kick: make(chan struct{}, 1)}
	c.mu.pools = map[uint32]*poolState{}
	c.mu.io.DriveIO = map[string]int64{}
	c.mu.io.DriveReads = map[string]int64{}
	c.mu.io.DriveWrites = map[string]int64{}
	return c
}

// Run runs passes until ctx ends: at start (so a rebuild interrupted by a
// restart resumes), whenever Kick is called (drive states changed), and
// every interval (to catch stripes committed with an old map while a pass
// ran). It is the only goroutine that should execute recovery tasks.
func (c *Coordinator) Run(ctx context.Context, interval time.Duration) {
	c.Kick()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.kick:
		case <-t.C:
		}
		for ctx.Err() == nil {
			again, err := c.Pass(ctx)
			if err != nil && ctx.Err() == nil {
				c.d.Log.Warn("rebuild pass", "err", err)
				break
			}
			if !again {
				break
			}
		}
	}
}

// Kick wakes Run (drive states changed); it never blocks.
func (c *Coordinator) Kick() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// Pass scans every pool, plans and runs one pass. again reports that work
// was done (or interrupted by a map change) and another pass should check
// the result. One pool's error is in its status and does not hold up the
// others.
func (c *Coordinator) Pass(ctx context.Context) (again bool, err error) {
	m, err := c.d.Maps.Map(ctx)
	if err != nil {
		return false, err
	}
	var errs []error
	for i := range m.Pools {
		pool := &m.Pools[i]
		a, err := c.pool(ctx, m, pool)
		if err != nil {
			c.mu.Lock()
			c.poolLocked(pool.ID).st.LastError = err.Error()
			c.mu.Unlock()
			errs = append(errs, fmt.Errorf("pool %q: %w", pool.Name, err))
		}
		again = again || a
	}
	return again, errors.Join(errs...)
}

// ReadRepaired counts n fragments rewritten by clients' read repair
// (Status.ReadRepairs).
func (c *Coordinator) ReadRepaired(n int64) {
	c.mu.Lock()
	c.mu.readRepairs += n
	c.mu.Unlock()
}

func (c *Coordinator) event(ctx context.Context, kind string, pool *clustermap.Pool, msg string, dur time.Duration) {
	c.d.Events.Event(ctx, kind, "pool/"+pool.Name, msg, dur)
}

// finishStuck ends a run of a pool in which every task failed: it is
// tried again at the next interval or drive state change, and the retries
// that fail the same way are logged, not events.
func (c *Coordinator) finishStuck(ctx context.Context, pool *clustermap.Pool, why string) {
	c.mu.Lock()
	pr := c.poolLocked(pool.ID)
	again := pr.stuck
	if again {
		pr.st.Active, pr.st.Bytes, pr.st.BytesDone, pr.st.Running = false, 0, 0, 0
	}
	c.mu.Unlock()
	if again {
		c.saveRun(ctx, pool.ID, Record{}) // the retry recorded itself as it started
		c.d.Log.Warn("rebuild retry failed", "pool", pool.Name, "why", why)
		return
	}
	c.finishRun(ctx, pool, why)
	c.mu.Lock()
	pr.stuck = true
	c.mu.Unlock()
}

// finishRun ends the run of a pool: done, or incomplete with the reason
// why not every stripe could be restored.
func (c *Coordinator) finishRun(ctx context.Context, pool *clustermap.Pool, incomplete string) {
	c.mu.Lock()
	pr := c.poolLocked(pool.ID)
	st := &pr.st
	dur := time.Since(time.Unix(0, st.Started))
	kind := st.Kind
	st.Active, st.LastSeconds = false, dur.Seconds()
	st.Bytes, st.BytesDone, st.Running = 0, 0, 0
	pr.announced, pr.stuck = incomplete, false
	c.mu.Unlock()
	c.saveRun(ctx, pool.ID, Record{})
	ev, msg := EventDone, fmt.Sprintf("%s finished in %s", kind, dur.Round(time.Millisecond))
	switch {
	case incomplete != "":
		ev, msg = EventIncomplete, fmt.Sprintf("%s ended after %s without restoring every stripe: %s", kind, dur.Round(time.Millisecond), incomplete)
	case kind == "rebalance":
		ev = EventRebalanceDone
	}
	c.event(ctx, ev, pool, msg, dur)
}
