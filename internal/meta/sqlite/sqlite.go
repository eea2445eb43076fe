package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net/url"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mattn/go-sqlite3"

	"poolfs/internal/meta"
)

// maxBatch bounds the number of Update calls in one SQLite transaction.
const maxBatch = 512

// scanChunk is how many rows Scan reads per query; rows are read before fn
// sees them, so fn may call other Tx methods.
const scanChunk = 256

// Engine is a meta.Engine on one SQLite database file.
type Engine struct {
	path     string
	lock     *os.File // flock'ed: this engine is the file's only user
	cache    *cache   // nil: off
	syncs    syncGroup
	wdb, rdb *sql.DB
	ckdb     *sql.DB // checkpoints; nil until Open has made it
	wq       writers
	quit     chan struct{}
	ckdone   chan struct{} // closed when the checkpointer exits
	close    sync.Once

	batches, updates atomic.Uint64 // group-commit statistics
	compiled         atomic.Uint64 // statements the lingering transactions compiled
	writes           atomic.Uint64 // put and delete statements run (Stats.Writes)

	linger       time.Duration         // Options.Linger (linger.go)
	lg           lingerState           // the lingering transaction, owned by the leader
	committedGen atomic.Uint64         // with linger: cache generation committed to SQLite
	failed       atomic.Pointer[error] // with linger: the open transaction was lost (fail)

	r stmts // prepared on rdb
	w stmts // prepared on wdb
}

// stmts are the prepared statements of one database handle.
type stmts struct{ get, scan, scanAll, put, del *sql.Stmt }

func (s *stmts) prepare(db *sql.DB, write bool) error {
	var err error
	p := func(q string) *sql.Stmt {
		if err != nil {
			return nil
		}
		st, e := db.Prepare(q)
		err = e
		return st
	}
	s.get = p(qGet)
	s.scan = p(qScan)
	s.scanAll = p(qScanAll)
	if write {
		s.put = p(qPut)
		s.del = p(qDel)
	}
	return err
}

// The statements of a transaction.
const (
	qGet     = `SELECT v FROM kv WHERE k = ?`
	qScan    = `SELECT k, v FROM kv WHERE k >= ? AND k < ? ORDER BY k LIMIT ?`
	qScanAll = `SELECT k, v FROM kv WHERE k >= ? ORDER BY k LIMIT ?`
	qPut     = `INSERT OR REPLACE INTO kv (k, v) VALUES (?, ?)`
	qDel     = `DELETE FROM kv WHERE k = ?`
)

// stmt returns *p, the statement q (prepared on the database as base)
// bound to t's transaction, binding it on first use (most transactions
// use two or three of the five): base bound to t.tx, or q prepared on the
// connection of a lingering transaction (t.ct).
func (t *txn) stmt(p **sql.Stmt, base *sql.Stmt, q string) (*sql.Stmt, error) {
	if *p != nil {
		return *p, nil
	}
	if t.ct != nil {
		s, err := t.ct.prepare(q)
		if err != nil {
			return nil, err
		}
		*p = s
		return s, nil
	}
	*p = t.tx.StmtContext(context.Background(), base)
	return *p, nil
}

var _ meta.Engine = (*Engine)(nil)

type request struct {
	ctx   context.Context
	fn    func(meta.Tx) error
	view  bool // with linger: fn is a View's, run read-only in the open transaction
	flush bool // with linger: commit the open transaction (no fn)
	err   error
	panic any
	done  chan struct{}
}

// Options tune an engine.
type Options struct {
	// Deferred makes a commit durable only at the next Sync (or WAL
	// checkpoint) instead of at once: synchronous=NORMAL, so Update no
	// longer waits for an fsync. Commits stay atomic and survive a crash of
	// the process, only a crash of the machine can lose the ones since the
	// last Sync — the POSIX contract, where a create is durable once its
	// directory is fsynced. Callers that need durability call Sync.
	Deferred bool
	// Linger, with Deferred, keeps a write transaction open this long for
	// the updates that follow, which then return without waiting for a
	// COMMIT (linger.go); Sync and Close commit it. A crash of the process
	// then also loses the updates of the last Linger that no Sync covered.
	// 0: every batch commits before its updates return. Needs the cache.
	Linger time.Duration
	// CacheEntries bounds the cache of committed values that answers
	// most reads without SQLite (cache.go); default 131072, negative: no
	// cache.
	CacheEntries int
}

// Open opens (creating if needed) the database at path, every commit
// durable when Update returns.
func Open(path string) (*Engine, error) { return OpenWith(path, Options{}) }

// OpenWith opens (creating if needed) the database at path.
func OpenWith(path string, o Options) (*Engine, error) {
	if o.Linger < 0 || (o.Linger > 0 && (!o.Deferred || o.CacheEntries < 0)) {
		return nil, fmt.Errorf("sqlite: Linger %v needs Deferred and the cache", o.Linger)
	}
	lock, err := lockFile(path)
	if err != nil {
		return nil, err
	}
	e, err := open(path, o)
	if err != nil {
		lock.Close()
		return nil, err
	}
	// A damaged page can hide records as well as garble them: refuse the
	// store before anything reads or writes it (doc.go, "Integrity").
	if err := checkIntegrity(context.Background(), e.ckdb, path, true); err != nil {
		e.closeDBs()
		lock.Close()
		return nil, err
	}
	e.lock = lock
	e.linger = o.Linger
	switch {
	case o.CacheEntries == 0:
		e.cache = newCache(defaultCacheEntries)
	case o.CacheEntries > 0:
		e.cache = newCache(o.CacheEntries)
	}
	go e.checkpointer()
	return e, nil
}

// lockFile takes an exclusive lock on the database file, so that a second
// engine (in this process or another) fails at once instead of writing
// behind the first one's cache. The lock is a flock, which does not
// interact with SQLite's fcntl locks; the descriptor stays open until
// Close has closed every connection (closing a descriptor of the file
// drops the process's fcntl locks on it). A new file is made 0600, its
// owner's only (the store is the whole namespace); SQLite gives the -wal
// and -shm files the database file's mode.
func lockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("sqlite %s is in use by another engine (another poolfs process?)", path)
		}
		return nil, fmt.Errorf("lock sqlite %s: %w", path, err)
	}
	return f, nil
}

func open(path string, o Options) (*Engine, error) {
	q := url.Values{}
	q.Set("_journal_mode", "WAL")
	if o.Deferred {
		q.Set("_synchronous", "NORMAL")
	} else {
		q.Set("_synchronous", "FULL")
	}
	q.Set("_busy_timeout", "10000")
	q.Set("_txlock", "immediate")
	// The writer never checkpoints (that would put a database fsync in
	// the commit path); the checkpointer goroutine does, on its own
	// connection.
	wdb := sql.OpenDB(connector{dsn: "file:" + path + "?" + q.Encode(), d: &sqlite3.SQLiteDriver{
		ConnectHook: func(c *sqlite3.SQLiteConn) error {
			_, err := c.Exec(`PRAGMA wal_autocheckpoint = 0`, nil)
			return err
		}}})
	wdb.SetMaxOpenConns(1)
	wdb.SetMaxIdleConns(1)
	wdb.SetConnMaxLifetime(0)
	const schema = `CREATE TABLE IF NOT EXISTS kv (k BLOB PRIMARY KEY, v BLOB NOT NULL) WITHOUT ROWID`
	if _, err := wdb.Exec(schema); err != nil {
		wdb.Close()
		return nil, fmt.Errorf("create kv table: %w", corruptErr(path, err))
	}
	q.Set("_txlock", "deferred")
	q.Set("_query_only", "1")
	rdb := sql.OpenDB(connector{dsn: "file:" + path + "?" + q.Encode(), d: &sqlite3.SQLiteDriver{
		ConnectHook: func(c *sqlite3.SQLiteConn) error {
			_, err := c.Exec(`PRAGMA mmap_size = 1073741824`, nil)
			return err
		}}})
	n := max(4, 2*runtime.GOMAXPROCS(0))
	rdb.SetMaxOpenConns(n)
	rdb.SetMaxIdleConns(n)
	rdb.SetConnMaxLifetime(0)
	var err error
	e := &Engine{path: path, wdb: wdb, rdb: rdb, quit: make(chan struct{}), ckdone: make(chan struct{})}
	e.wq.idle.L = &e.wq.Mutex
	q.Del("_query_only")
	if e.ckdb, err = sql.Open("sqlite3", "file:"+path+"?"+q.Encode()); err != nil {
		e.closeDBs()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	e.ckdb.SetMaxOpenConns(1)
	if err = errors.Join(e.r.prepare(rdb, false), e.w.prepare(wdb, true)); err != nil {
		e.closeDBs()
		return nil, fmt.Errorf("sqlite %s: %w", path, err)
	}
	return e, nil
}

// Dialect reports {Name: "sqlite", Shared: false}.
func (e *Engine) Dialect() meta.Dialect { return meta.Dialect{Name: "sqlite", CachedGets: true} }

// Close waits for queued updates, then closes the database.
func (e *Engine) Close() error {
	var err error
	e.close.Do(func() {
		q := &e.wq
		q.Lock()
		q.closed = true
		for q.leading {
			q.idle.Wait()
		}
		q.Unlock()
		// No one leads now, and no one will: the lingering transaction
		// is this goroutine's.
		if e.linger > 0 {
			err = e.commitLinger()
		}
		close(e.quit)
		<-e.ckdone
		err = errors.Join(err, e.closeDBs())
		if e.lock != nil {
			err = errors.Join(err, e.lock.Close())
		}
	})
	return err
}

func (e *Engine) closeDBs() error {
	err := errors.Join(e.rdb.Close(), e.wdb.Close())
	if e.ckdb != nil {
		err = errors.Join(err, e.ckdb.Close())
	}
	return err
}

// connector opens connections with d, for a ConnectHook.
type connector struct {
	dsn string
	d   *sqlite3.SQLiteDriver
}

func (c connector) Connect(context.Context) (driver.Conn, error) { return c.d.Open(c.dsn) }
func (c connector) Driver() driver.Driver                        { return c.d }

// Checkpoint policy: a passive checkpoint (concurrent with the writer and
// readers) every checkpointEvery; a restart checkpoint, which waits for
// the writer, when the WAL has grown beyond walRestartFrames.
const (
	checkpointEvery  = 100 * time.Millisecond
	walRestartFrames = 1 << 16
)

func (e *Engine) checkpointer() {
	defer close(e.ckdone)
	t := time.NewTicker(checkpointEvery)
	defer t.Stop()
	for {
		select {
		case <-e.quit:
			e.checkpoint("TRUNCATE")
			return
		case <-t.C:
			if frames := e.checkpoint("PASSIVE"); frames > walRestartFrames {
				e.checkpoint("RESTART")
			}
		}
	}
}

// checkpoint runs one checkpoint and returns the WAL size in frames.
// Failures are harmless (the next one retries), so they are not reported.
func (e *Engine) checkpoint(mode string) int {
	var busy, log, done int
	_ = e.ckdb.QueryRow(`PRAGMA wal_checkpoint(`+mode+`)`).Scan(&busy, &log, &done)
	return log
}

var errClosed = errors.New("sqlite: engine closed")

// writers is the queue of Update requests. There is no committer
// goroutine: the Update that finds no batch running leads, running the
// queued requests as one batch on its own goroutine (a lone writer so pays
// no hand-off to another goroutine and back). If more requests queued up
// meanwhile, it hands the lead to a new goroutine, which runs batches until
// the queue is empty.
type writers struct {
	sync.Mutex
	queue   []*request
	leading bool // a goroutine is running batches
	closed  bool
	flush   bool      // with linger: commit the open transaction when the queue is empty
	idle    sync.Cond // broadcast when leading becomes false
}

// Update queues fn for the next batch and waits until the batch has
// committed (with Options.Linger: until fn's savepoint in the open
// transaction is released, see linger.go). fn runs while the engine's
// batch runs, on this goroutine or another: it must not call Update or
// View (deadlock).
func (e *Engine) Update(ctx context.Context, fn func(meta.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return e.enqueue(&request{ctx: ctx, fn: fn})
}

// lead runs batches of queued requests until the queue is empty, or, with
// once, runs one batch and hands the rest to a new goroutine.
func (e *Engine) lead(once bool) {
	q := &e.wq
	for ran := false; ; ran = true {
		q.Lock()
		due := e.lingerDueLocked()
		if len(q.queue) == 0 && !due {
			q.flush = q.flush && e.lg.t != nil
			q.leading = false
			q.idle.Broadcast()
			q.Unlock()
			return
		}
		if once && ran {
			// This goroutine's own request has run: let it return.
			q.Unlock()
			go e.lead(false)
			return
		}
		// A caller that leads runs its own request first and leaves a
		// due commit to a goroutine of its own (below): with writes
		// behind (linger.go) a commit runs the transaction's statements,
		// which the caller (a FUSE request) would otherwise wait for.
		if due && !(once && !ran) {
			q.flush = false
			q.Unlock()
			e.commitLinger() //nolint:errcheck // it fails the engine
			continue
		}
		n := min(len(q.queue), maxBatch)
		batch := q.queue[:n:n]
		q.queue = append([]*request(nil), q.queue[n:]...)
		q.Unlock()
		if e.linger > 0 {
			e.runLinger(batch)
		} else {
			e.runBatch(batch)
		}
	}
}

// Stats are counters of the group commit.
type Stats struct {
	Batches uint64 // SQLite transactions committed (one fsync each)
	Updates uint64 // Update calls run in them
	// Compiled counts the SQL statements the lingering transactions
	// (Options.Linger) compiled: prepared, or run from their text.
	Compiled uint64
	// Writes counts the put and delete statements run. In a lingering
	// transaction a key that several updates wrote is stored once.
	Writes uint64
}

// Stats returns the group-commit counters since Open.
func (e *Engine) Stats() Stats {
	return Stats{Batches: e.batches.Load(), Updates: e.updates.Load(), Compiled: e.compiled.Load(), Writes: e.writes.Load()}
}

func (e *Engine) runBatch(batch []*request) {
	e.batches.Add(1)
	e.updates.Add(uint64(len(batch)))
	ctx := context.Background()
	err := e.commitBatch(ctx, batch)
	for _, r := range batch {
		if err != nil && r.err == nil && r.panic == nil {
			r.err = err
		}
		close(r.done)
	}
}

// commitBatch runs each request's fn in a savepoint of one transaction and
// commits it. r.err is fn's error; the returned error is the batch's.
func (e *Engine) commitBatch(ctx context.Context, batch []*request) error {
	tx, err := e.wdb.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlite begin: %w", err)
	}
	t := &txn{ctx: ctx, tx: tx, write: true, base: &e.w, writes: &e.writes}
	if e.cache != nil {
		// The committer is the only one to apply batches: gen cannot
		// change while the batch runs, so what it read is current until
		// commit applies the batch (commit fills first; this fill, after
		// a failure, finds gen unchanged).
		t.cache, t.reads, t.gen = e.cache, writeSet{}, e.cache.generation()
		defer func() { e.cache.fill(t.gen, t.reads) }()
	}
	if len(batch) == 1 {
		// A batch of one needs no savepoint: a failed fn rolls back the
		// whole transaction (two statements fewer per serial update).
		r := batch[0]
		if r.err = r.ctx.Err(); r.err != nil {
			tx.Rollback() //nolint:errcheck
			return nil
		}
		t.ctx = r.ctx
		t.startRequest()
		r.panic, r.err = run(r.fn, t)
		if r.err != nil || r.panic != nil {
			if err := tx.Rollback(); err != nil {
				return fmt.Errorf("sqlite rollback: %w", err)
			}
			return nil
		}
		return e.commit(tx, t, t.req)
	}
	if t.cache != nil {
		t.batch = writeSet{}
	}
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.err = err
			continue
		}
		if _, err := tx.ExecContext(ctx, `SAVEPOINT u`); err != nil {
			tx.Rollback() //nolint:errcheck
			return fmt.Errorf("sqlite savepoint: %w", err)
		}
		t.ctx = r.ctx
		t.startRequest()
		r.panic, r.err = run(r.fn, t)
		t.ctx = ctx
		if r.err == nil && r.panic == nil {
			t.endRequest()
		}
		if r.err != nil || r.panic != nil {
			if _, err := tx.ExecContext(ctx, `ROLLBACK TO u`); err != nil {
				tx.Rollback() //nolint:errcheck
				return fmt.Errorf("sqlite rollback to savepoint: %w", err)
			}
		}
		if _, err := tx.ExecContext(ctx, `RELEASE u`); err != nil {
			tx.Rollback() //nolint:errcheck
			return fmt.Errorf("sqlite release savepoint: %w", err)
		}
	}
	return e.commit(tx, t, t.batch)
}

// commit commits tx and updates the cache: first with what t read, then
// with the writes w.
func (e *Engine) commit(tx *sql.Tx, t *txn, w writeSet) error {
	if e.cache != nil {
		e.cache.fill(t.gen, t.reads)
		e.cache.begin()
	}
	if err := tx.Commit(); err != nil {
		if e.cache != nil {
			e.cache.reset() // the outcome is not known for sure
		}
		return fmt.Errorf("sqlite commit: %w", err)
	}
	if e.cache != nil {
		e.cache.apply(w)
	}
	return nil
}

// run calls fn, turning a panic into a value the caller re-panics with.
func run(fn func(meta.Tx) error, t *txn) (p any, err error) {
	defer func() {
		if v := recover(); v != nil {
			p = v
		}
	}()
	return nil, fn(t)
}

// txn is a meta.Tx on a database/sql transaction.
type txn struct {
	ctx   context.Context
	tx    *sql.Tx // nil for a lingering transaction, which holds ct
	ct    *connTx
	write bool
	base  *stmts // prepared on the database
	st    stmts  // base's statements bound to tx, on first use

	// With the cache: a write transaction's Gets see, in this order, the
	// request's own writes (req), those of the batch's earlier requests
	// (batch, nil for a batch of one), the cache, then SQLite. reads
	// collects what Gets read from SQLite, for the cache.
	cache      *cache
	req, batch writeSet
	reads      writeSet
	gen        uint64 // the cache's generation when the batch began

	// A lingering transaction's writes run in SQLite behind the updates
	// that made them (linger.go, "Writes behind"): behind holds the writes
	// of acknowledged updates not yet run (nil: a delete), reqBehind the
	// current request's. Both run before a Scan, behind at commit. inSave:
	// the current request's savepoint is open (its writes ran early).
	// lost is set when writes of acknowledged updates failed to run.
	lazy              bool
	behind, reqBehind writeSet
	inSave            bool
	lost              error
	writes            *atomic.Uint64 // Stats.Writes
}

// startRequest begins the writes of the next request of a batch.
func (t *txn) startRequest() {
	if t.cache != nil {
		t.req = writeSet{}
	}
	if t.lazy {
		clear(t.reqBehind)
		t.inSave = false
	}
}

// endRequest adds a successful request's writes to the batch's.
func (t *txn) endRequest() {
	for k, v := range t.req {
		t.batch[k] = v
	}
}

// pending returns what this write transaction wrote to key, if anything.
func (t *txn) pending(key []byte) (v []byte, ok bool) {
	if v, ok = t.req[string(key)]; ok {
		return v, true
	}
	v, ok = t.batch[string(key)]
	return v, ok
}

var _ meta.Tx = (*txn)(nil)

var errReadOnly = errors.New("sqlite: write in a View transaction")

func (t *txn) Get(key []byte) ([]byte, error) {
	if t.cache != nil {
		v, ok := t.pending(key)
		if !ok {
			v, ok = t.cache.get(key)
		} else if v != nil {
			v = append([]byte{}, v...)
		}
		if !ok && t.lazy {
			if v, ok = t.behind[string(key)]; ok && v != nil {
				v = append([]byte{}, v...)
			}
		}
		if ok {
			if v == nil {
				return nil, meta.ErrNoKey
			}
			return v, nil
		}
	}
	var v []byte
	st, err := t.stmt(&t.st.get, t.base.get, qGet)
	if err == nil {
		err = st.QueryRowContext(t.ctx, key).Scan(&v)
	}
	if errors.Is(err, sql.ErrNoRows) {
		if t.reads != nil {
			t.reads[string(key)] = nil
		}
		return nil, meta.ErrNoKey
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite get: %w", err)
	}
	if v == nil {
		v = []byte{}
	}
	if t.reads != nil {
		t.reads[string(key)] = append([]byte{}, v...)
	}
	return v, nil
}

func (t *txn) Put(key, value []byte) error {
	if !t.write {
		return errReadOnly
	}
	if value == nil {
		value = []byte{}
	}
	if t.lazy {
		v := append([]byte{}, value...)
		t.req[string(key)], t.reqBehind[string(key)] = v, v
		return nil
	}
	if err := t.put(key, value); err != nil {
		return err
	}
	if t.req != nil {
		t.req[string(key)] = append([]byte{}, value...)
	}
	return nil
}

// put runs the statement that stores value at key.
func (t *txn) put(key, value []byte) error {
	st, err := t.stmt(&t.st.put, t.base.put, qPut)
	if err == nil {
		_, err = st.ExecContext(t.ctx, key, value)
	}
	if err != nil {
		return fmt.Errorf("sqlite put: %w", err)
	}
	if t.writes != nil {
		t.writes.Add(1)
	}
	return nil
}

// del runs the statement that deletes key.
func (t *txn) del(key []byte) error {
	st, err := t.stmt(&t.st.del, t.base.del, qDel)
	if err == nil {
		_, err = st.ExecContext(t.ctx, key)
	}
	if err != nil {
		return fmt.Errorf("sqlite delete: %w", err)
	}
	if t.writes != nil {
		t.writes.Add(1)
	}
	return nil
}

func (t *txn) Delete(key []byte) error {
	if !t.write {
		return errReadOnly
	}
	if t.lazy {
		t.req[string(key)], t.reqBehind[string(key)] = nil, nil
		return nil
	}
	if err := t.del(key); err != nil {
		return err
	}
	if t.req != nil {
		t.req[string(key)] = nil
	}
	return nil
}

func (t *txn) Scan(start, end []byte, limit int, fn func(key, value []byte) bool) error {
	return meta.ScanChunks(start, limit, scanChunk, func(start []byte, n int) ([]meta.Pair, error) {
		if t.lazy {
			// What the scan reads must include the writes made so far
			// (fn may write between chunks).
			if err := t.runBehind(); err != nil {
				return nil, err
			}
		}
		rows, err := t.query(start, end, n)
		if err != nil {
			return nil, fmt.Errorf("sqlite scan: %w", err)
		}
		out := make([]meta.Pair, 0, n)
		for rows.Next() {
			var p meta.Pair
			if err := rows.Scan(&p.K, &p.V); err != nil {
				rows.Close()
				return nil, fmt.Errorf("sqlite scan: %w", err)
			}
			out = append(out, p)
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return nil, fmt.Errorf("sqlite scan: %w", err)
		}
		return out, nil
	}, fn)
}

func (t *txn) query(start, end []byte, n int) (*sql.Rows, error) {
	if end == nil {
		st, err := t.stmt(&t.st.scanAll, t.base.scanAll, qScanAll)
		if err != nil {
			return nil, err
		}
		return st.QueryContext(t.ctx, start, n)
	}
	st, err := t.stmt(&t.st.scan, t.base.scan, qScan)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(t.ctx, start, end, n)
}
