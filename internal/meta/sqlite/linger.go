package sqlite

import (
	"context"
	"errors"
	"fmt"
	"time"

	"poolfs/internal/meta"
)

// Lingering transactions (Options.Linger).
//
// A COMMIT costs far more than the statements of a typical update (a
// create is half a dozen puts): with Linger, the write connection keeps
// one transaction open for up to Linger, every Update runs in a savepoint
// of it and returns as soon as its savepoint is released, and the
// transaction commits when it is Linger old, when it holds
// maxLingerUpdates updates, at Sync and at Close. That is the group commit
// of a journalling file system in time rather than in concurrency, and it
// keeps the engine's promise unchanged: Deferred already made a commit
// durable only at the next Sync; now an update is also visible to other
// processes only then (none can read the file: the engine holds it
// exclusively).
//
// Visibility inside the process. An Update's writes go to the cache when
// its savepoint is released (applyNow), so the cache holds the
// acknowledged state, ahead of what SQLite has committed. committedGen is
// the cache generation up to which every write is committed. A View reads
// the cache as before; one that misses it while the engine is dirty
// (generation > committedGen) runs again on the write connection, inside
// the open transaction (a view request in the writers' queue), where it
// sees every acknowledged update; a clean engine's Views use the read
// connections as before.
//
// Failure. If the COMMIT fails, updates that were acknowledged are lost:
// the engine fails for good (every later call returns the error) rather
// than let anyone read around the hole. The statements of a lingering
// transaction run with a context that is never cancelled, because SQLite
// rolls back the whole transaction when a statement of it is interrupted.

// maxLingerUpdates bounds the updates in one lingering transaction.
const maxLingerUpdates = 4096

// lingerState is the open transaction. It is owned by the goroutine that
// leads the writers' queue (wq.leading), like every use of the write
// connection.
type lingerState struct {
	t     *txn // nil: no transaction open
	since time.Time
	n     int
	timer *time.Timer
}

// lingerDueLocked reports whether the open transaction should commit now.
// The caller leads and holds wq's mutex.
func (e *Engine) lingerDueLocked() bool {
	lg := &e.lg
	return lg.t != nil && (e.wq.flush || time.Since(lg.since) >= e.linger || lg.n >= maxLingerUpdates)
}

// lingerFire asks the leader, or becomes the leader, to commit the open
// transaction that has lingered long enough.
func (e *Engine) lingerFire() {
	q := &e.wq
	q.Lock()
	if q.closed {
		q.Unlock()
		return
	}
	q.flush = true
	if q.leading {
		q.Unlock()
		return
	}
	q.leading = true
	q.Unlock()
	e.lead(false)
}

// beginLinger opens the lingering transaction.
func (e *Engine) beginLinger() error {
	ct, err := beginConn(e.wdb, &e.compiled)
	if err != nil {
		return fmt.Errorf("sqlite begin: %w", err)
	}
	e.lg.t = &txn{ctx: context.Background(), ct: ct, write: true, base: &e.w, cache: e.cache, reads: writeSet{},
		lazy: true, behind: writeSet{}, reqBehind: writeSet{}, writes: &e.writes}
	e.lg.since, e.lg.n = time.Now(), 0
	e.lg.timer = time.AfterFunc(e.linger, e.lingerFire)
	return nil
}

// commitLinger commits the open transaction. A failure fails the engine.
func (e *Engine) commitLinger() error {
	lg := &e.lg
	if lg.t == nil {
		return nil
	}
	lg.timer.Stop()
	gen := e.cache.generation() // only the leader changes it
	if err := lg.t.runWrites(lg.t.behind); err != nil {
		lg.t.ct.rollback() //nolint:errcheck // the engine fails either way
		lg.t = nil
		return e.fail(err)
	}
	err := lg.t.ct.commit()
	lg.t = nil
	e.batches.Add(1)
	if err != nil {
		return e.fail(fmt.Errorf("sqlite commit: %w", err))
	}
	e.committedGen.Store(gen)
	return nil
}

// fail makes the engine unusable after the lingering transaction was lost
// (its COMMIT or one of its savepoint statements failed): acknowledged
// updates are gone, so no one may read on. It returns the error every
// later call gets.
func (e *Engine) fail(err error) error {
	err = fmt.Errorf("%w (updates since the last commit are lost; restart the metadata service)", err)
	e.cache.reset()
	e.failed.CompareAndSwap(nil, &err)
	return err
}

// failure returns the error the engine failed with, or nil.
func (e *Engine) failure() error {
	if p := e.failed.Load(); p != nil {
		return *p
	}
	return nil
}

// runLinger runs a batch of requests in the lingering transaction and
// acknowledges each as soon as it has run; flush requests are answered
// once the transaction committed.
func (e *Engine) runLinger(batch []*request) {
	flush := false
	for _, r := range batch {
		if r.flush {
			flush = true
			continue
		}
		e.runLingerOne(r)
		close(r.done)
	}
	if !flush {
		return
	}
	err := e.commitLinger()
	if err == nil {
		err = e.failure()
	}
	for _, r := range batch {
		if r.flush {
			r.err = err
			close(r.done)
		}
	}
}

func (e *Engine) runLingerOne(r *request) {
	if r.err = r.ctx.Err(); r.err != nil {
		return
	}
	if r.err = e.failure(); r.err != nil {
		return
	}
	if e.lg.t == nil {
		if r.err = e.beginLinger(); r.err != nil {
			return
		}
	}
	t := e.lg.t
	t.startRequest()
	if r.view {
		t.write = false
		r.panic, r.err = run(r.fn, t)
		t.write = true
		if t.lost != nil {
			r.err = e.abortLinger(t.lost)
			return
		}
		e.fillReads(t)
	} else {
		r.panic, r.err = run(r.fn, t)
		if t.lost != nil {
			r.err = e.abortLinger(t.lost)
			return
		}
		failed := r.err != nil || r.panic != nil
		if t.inSave {
			if failed {
				if err := t.ct.execFixed(`ROLLBACK TO u`); err != nil {
					r.err = e.abortLinger(fmt.Errorf("sqlite rollback to savepoint: %w", err))
					return
				}
			}
			if err := t.ct.execFixed(`RELEASE u`); err != nil {
				r.err = e.abortLinger(fmt.Errorf("sqlite release savepoint: %w", err))
				return
			}
		}
		if !failed {
			for k, v := range t.reqBehind {
				t.behind[k] = v
			}
		}
		clear(t.reqBehind)
		e.updates.Add(1)
		// What the request read from SQLite is the acknowledged state
		// from before its writes: cached first, so that its writes,
		// stored after, replace it. (The other way round, a key the
		// request read and then wrote, evicted by the store of its
		// writes, came back as the value read: a record just written read
		// as absent.)
		e.fillReads(t)
		if r.err == nil && r.panic == nil {
			e.cache.applyNow(t.req)
			e.lg.n++
		}
	}
}

// Writes behind. An update of the lingering transaction runs no SQL
// statement for its writes: they go to the request's writeSet (and so to
// the cache when it returns, as before) and to reqBehind, which joins
// behind when the update succeeds and is dropped when it fails. The
// statements run later, on whichever goroutine leads then: behind at
// commit (mostly the Linger timer's), both before a Scan (which reads
// SQLite), the request's own under a savepoint opened then (a failed
// update rolls back to it). A Get looks at behind after the cache, so
// what it reads from SQLite is current. A key written by several updates
// of one transaction (an inode by its create, its close and its release;
// the usage counters by every update) is stored once, and an update
// returns without a statement or a savepoint in the common case: a
// small file's create and close used to run about twenty statements on
// the FUSE request's thread. Behind holds at most maxLingerUpdates
// updates' writes. If its statements fail, acknowledged updates are
// lost, which fails the engine as a failed COMMIT does.

// runBehind runs the writes made so far in SQLite: the acknowledged
// updates' (behind) and, in the request's savepoint, the current
// request's (reqBehind). A failure of the former sets t.lost.
func (t *txn) runBehind() error {
	if err := t.runWrites(t.behind); err != nil {
		t.lost = err
		return err
	}
	if len(t.reqBehind) == 0 {
		return nil
	}
	if !t.inSave {
		if err := t.ct.execFixed(`SAVEPOINT u`); err != nil {
			t.lost = fmt.Errorf("sqlite savepoint: %w", err)
			return t.lost
		}
		t.inSave = true
	}
	return t.runWrites(t.reqBehind)
}

// runWrites runs the statements of ws and empties it.
func (t *txn) runWrites(ws writeSet) error {
	for k, v := range ws {
		var err error
		if v == nil {
			err = t.del([]byte(k))
		} else {
			err = t.put([]byte(k), v)
		}
		if err != nil {
			return err
		}
	}
	clear(ws)
	return nil
}

// fillReads caches what the current request of the lingering transaction
// t read from SQLite.
func (e *Engine) fillReads(t *txn) {
	if len(t.reads) > 0 {
		e.cache.fill(e.cache.generation(), t.reads)
		clear(t.reads)
	}
}

// abortLinger drops the open transaction after one of its savepoint
// statements failed, and fails the engine.
func (e *Engine) abortLinger(err error) error {
	e.lg.timer.Stop()
	e.lg.t.ct.rollback() //nolint:errcheck // the engine fails either way
	e.lg.t = nil
	return e.fail(err)
}

// enqueue adds r to the writers' queue, leading if no one does, and waits
// for it.
func (e *Engine) enqueue(r *request) error {
	r.done = make(chan struct{})
	q := &e.wq
	q.Lock()
	if q.closed {
		q.Unlock()
		return errClosed
	}
	if err := e.failure(); err != nil {
		q.Unlock()
		return err
	}
	q.queue = append(q.queue, r)
	lead := !q.leading
	q.leading = true
	q.Unlock()
	if lead {
		e.lead(true)
	}
	<-r.done
	if r.panic != nil {
		panic(r.panic)
	}
	return r.err
}

// viewOnWriter runs a View's fn inside the lingering transaction.
func (e *Engine) viewOnWriter(ctx context.Context, fn func(meta.Tx) error) error {
	return e.enqueue(&request{ctx: ctx, fn: fn, view: true})
}

// flushLinger commits the lingering transaction, if any.
func (e *Engine) flushLinger(ctx context.Context) error {
	err := e.enqueue(&request{ctx: ctx, flush: true})
	if errors.Is(err, errClosed) {
		return nil // Close committed it
	}
	return err
}

// dirty reports whether the cache holds acknowledged writes not yet
// committed, at generation gen.
func (e *Engine) dirty(gen uint64) bool {
	return e.linger > 0 && gen != e.committedGen.Load()
}
