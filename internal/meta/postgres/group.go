package postgres

import (
	"context"
	"errors"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"poolfs/internal/meta"
)

// Group commit. Concurrent Update calls of one engine (the creates of
// many clients through one metadata server) are combined: a leader takes
// up to maxGroup queued calls and runs their functions one after another
// in one SERIALIZABLE transaction, so they share BEGIN, COMMIT and its WAL
// flush. Each function's writes wait in a layer of their own: one that
// returns an error has its writes dropped and its error returned, and the
// others commit. Run in sequence in one transaction, the functions are
// equivalent to running them serially, each seeing its predecessors'
// writes.
//
// One transaction runs at a time (maxRunning): concurrent SERIALIZABLE
// creates in different directories abort each other (PostgreSQL's
// predicate locks on index pages cover neighbouring names), about one
// attempt in four with 16 creators; one at a time, an engine's calls never
// conflict with each other, only with other engines' (other metadata
// servers). A group that conflicts runs again up to groupAttempts times.
// A group that cannot commit as a whole (conflicts, a failed statement,
// or a function that failed after a Scan sent its writes to the server)
// commits nothing, and its calls run again on their own, one after
// another in the group's place, with the usual retries (side by side they
// would abort each other: the creates of one server count in one
// inode-count shard); a function may run more than once, as the Engine
// contract allows. A call that finds fewer than maxRunning transactions
// running and none waiting runs on its own at once.
const (
	maxGroup      = 16 // calls per group transaction
	maxRunning    = 1  // Update transactions at once
	groupAttempts = 3  // of a group, before its calls run on their own
)

type groupQueue struct {
	mu      sync.Mutex
	queue   []*request // guarded by mu
	running int        // transactions of Update calls running; guarded by mu
}

type request struct {
	ctx  context.Context
	fn   func(meta.Tx) error
	done chan error // the call's outcome
}

// errAlone is a group that must not commit as a whole: its calls run on
// their own.
var errAlone = errors.New("postgres: run alone")

// Update runs fn in a SERIALIZABLE transaction, retrying on conflicts.
// While maxRunning transactions run, calls wait in a queue, and the next
// transaction to start takes the queue as one group.
func (e *Engine) Update(ctx context.Context, fn func(meta.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	g := &e.group
	g.mu.Lock()
	if g.running < maxRunning && len(g.queue) == 0 {
		g.running++
		g.mu.Unlock()
		err := e.updateAlone(ctx, fn)
		e.next()
		return err
	}
	r := &request{ctx: ctx, fn: fn, done: make(chan error, 1)}
	g.queue = append(g.queue, r)
	g.mu.Unlock()
	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
		// A group skips a call whose context has ended; one that ran
		// already may commit, as a COMMIT on a dropped connection may.
		return ctx.Err()
	}
}

// next runs the queued calls, as groups, in the place of a transaction
// that has ended, or frees that place if none wait. One goroutine runs
// the groups one after another for as long as calls keep waiting: a
// goroutine started for each group grew its stack anew each time (about
// a tenth of a metadata server's CPU in a create phase).
func (e *Engine) next() {
	if batch := e.take(); batch != nil {
		go func() {
			for ; batch != nil; batch = e.take() {
				e.runBatch(batch)
			}
		}()
	}
}

// take returns the next group of queued calls, or nil, having freed the
// transaction's place, if none wait.
func (e *Engine) take() []*request {
	g := &e.group
	g.mu.Lock()
	defer g.mu.Unlock()
	n := min(len(g.queue), maxGroup)
	if n == 0 {
		g.running--
		return nil
	}
	batch := g.queue[:n:n]
	g.queue = append([]*request(nil), g.queue[n:]...)
	return batch
}

// runBatch runs the calls of batch, as one group if it can, and gives
// each its outcome.
func (e *Engine) runBatch(batch []*request) {
	if len(batch) == 1 {
		batch[0].done <- e.updateAlone(batch[0].ctx, batch[0].fn)
		return
	}
	if errs, settled := e.speculate(batch); settled {
		for i, r := range batch {
			r.done <- errs[i]
		}
		return
	}
	errs, err := e.runGroup(batch)
	for attempt := 1; errors.Is(err, meta.ErrRetry) && attempt < groupAttempts; attempt++ {
		e.stats.retries.Add(1)
		time.Sleep(time.Duration(attempt) * time.Millisecond / 2)
		errs, err = e.runGroup(batch)
	}
	for i, r := range batch {
		switch {
		case errors.Is(err, meta.ErrRetry) || errors.Is(err, errAlone):
			// Nothing committed: the calls run on their own, one
			// after another in this transaction's place. Side by
			// side they would conflict with each other (they write
			// the same inode-count shard).
			if err := r.ctx.Err(); err != nil {
				r.done <- err
				continue
			}
			r.done <- e.updateAlone(r.ctx, r.fn)
		case err != nil:
			r.done <- err // as a call of its own would fail
		default:
			r.done <- errs[i]
		}
	}
}

// runGroup runs the functions of batch in one transaction. It returns
// each function's error, or an error if the group did not commit.
func (e *Engine) runGroup(batch []*request) ([]error, error) {
	ctx, stop := groupContext(batch)
	defer stop()
	errs := make([]error, len(batch))
	first := firstReads(batch)
	err := e.run(ctx, beginUpdate, true, func(tx meta.Tx) error {
		t := tx.(*txn)
		if len(first) > 0 {
			if err := t.Prefetch(first...); err != nil {
				return err
			}
		}
		for i, r := range batch {
			if errs[i] = r.ctx.Err(); errs[i] != nil {
				continue
			}
			t.layer, t.layerSent = map[string][]byte{}, false
			errs[i] = r.fn(t)
			if t.failed != nil {
				return t.failed
			}
			if errs[i] != nil && t.layerSent {
				return errAlone
			}
			if errs[i] == nil {
				t.mergeLayer()
			}
		}
		t.layer = nil
		return nil
	})
	if err != nil {
		return nil, err
	}
	e.stats.groups.Add(1)
	e.stats.updates.Add(uint64(len(batch)))
	return errs, nil
}

// groupContext returns the context of a transaction of the calls of
// batch: it lives while any of its callers waits. stop releases it.
func groupContext(batch []*request) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var waiting atomic.Int64
	waiting.Store(int64(len(batch)))
	stops := make([]func() bool, 0, len(batch))
	for _, r := range batch {
		stops = append(stops, context.AfterFunc(r.ctx, func() {
			if waiting.Add(-1) == 0 {
				cancel()
			}
		}))
	}
	return ctx, func() {
		for _, s := range stops {
			s()
		}
		cancel()
	}
}

// mergeLayer moves the writes of the function that ran last into the
// transaction's pending writes.
func (t *txn) mergeLayer() {
	if len(t.layer) == 0 {
		return
	}
	if t.pending == nil {
		t.pending = make(map[string][]byte, len(t.layer))
	}
	maps.Copy(t.pending, t.layer)
	clear(t.layer)
}
