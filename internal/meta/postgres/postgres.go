// Package postgres is the shared meta.Engine: a PostgreSQL table
// kv(k bytea PRIMARY KEY, v bytea NOT NULL) used by any number of metadata
// servers at once.
//
// Isolation: Update runs SERIALIZABLE. The Store's transactions decide on
// what they read, including absences (a name not taken, a directory with no
// entries for rmdir, a stripe generation for compare-and-set); REPEATABLE
// READ with SELECT ... FOR UPDATE cannot lock a row that does not exist, so
// create-vs-create and rmdir-vs-create races would need extra lock rows.
// SERIALIZABLE (SSI, predicate locks on the index ranges scanned) gives the
// Engine contract directly. Serialization failures (40001) and deadlocks
// (40P01) are retried with jittered exponential backoff. View runs
// REPEATABLE READ READ ONLY: a snapshot that never aborts.
//
// Writes wait in the transaction and go to the server in one batch when
// it commits (or before a Scan), so an update costs its reads and two more
// round trips, not one per key written.
//
// Durability is the server's: a commit returns after the WAL flush
// (synchronous_commit=on, the default), or, with synchronous_commit=off in
// the URL, at the next Sync (sync.go).
//
// Connections come from a small pool of pgx.Conn (pgxpool is not used: its
// puddle dependency is not in go.mod).
package postgres

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"poolfs/internal/meta"
)

// Engine is a meta.Engine on a PostgreSQL database.
type Engine struct {
	cfg *pgx.ConnConfig
	sem chan struct{} // one token per open connection allowed
	mu  struct {
		sync.Mutex
		idle   []*pgx.Conn // guarded by mu
		closed bool        // guarded by mu
	}
}

var _ meta.Engine = (*Engine)(nil)

// MaxConns is the size of the connection pool.
const MaxConns = 16

// maxAttempts bounds the retries of one Update on conflicts. Many
// writers of one hot row (creates in one directory) need many rounds.
const maxAttempts = 1000

const schema = `CREATE TABLE IF NOT EXISTS kv (k bytea PRIMARY KEY, v bytea NOT NULL)`

// Open connects to url (a postgres:// URL or DSN) and creates the kv table
// if it is missing.
func Open(ctx context.Context, url string) (*Engine, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres: parse url: %w", err)
	}
	e := &Engine{cfg: cfg, sem: make(chan struct{}, MaxConns)}
	c, err := e.acquire(ctx)
	if err != nil {
		return nil, err
	}
	_, err = c.Exec(ctx, schema)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == "23505" || pe.Code == "42P07") {
		err = nil // another server created it at the same moment
	}
	e.release(c)
	if err != nil {
		e.Close()
		return nil, fmt.Errorf("postgres: create kv table: %w", err)
	}
	return e, nil
}

// Dialect reports {Name: "postgres", Shared: true}.
func (e *Engine) Dialect() meta.Dialect { return meta.Dialect{Name: "postgres", Shared: true} }

var errClosed = errors.New("postgres: engine closed")

func (e *Engine) acquire(ctx context.Context) (*pgx.Conn, error) {
	select {
	case e.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	e.mu.Lock()
	if e.mu.closed {
		e.mu.Unlock()
		<-e.sem
		return nil, errClosed
	}
	if n := len(e.mu.idle); n > 0 {
		c := e.mu.idle[n-1]
		e.mu.idle = e.mu.idle[:n-1]
		e.mu.Unlock()
		return c, nil
	}
	e.mu.Unlock()
	c, err := pgx.ConnectConfig(ctx, e.cfg)
	if err != nil {
		<-e.sem
		return nil, fmt.Errorf("postgres: connect: %w", err)
	}
	return c, nil
}

// release returns c to the pool, or closes it if it is broken or still in
// a transaction (pgx closes a connection on network errors).
func (e *Engine) release(c *pgx.Conn) {
	defer func() { <-e.sem }()
	e.mu.Lock()
	if !c.IsClosed() && !e.mu.closed && c.PgConn().TxStatus() == 'I' {
		e.mu.idle = append(e.mu.idle, c)
		e.mu.Unlock()
		return
	}
	e.mu.Unlock()
	c.Close(context.Background())
}

// Close closes idle connections; connections in use close on release.
func (e *Engine) Close() error {
	e.mu.Lock()
	idle := e.mu.idle
	e.mu.idle, e.mu.closed = nil, true
	e.mu.Unlock()
	for _, c := range idle {
		c.Close(context.Background())
	}
	return nil
}

// retryable reports whether err is a serialization failure or deadlock.
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// Update runs fn in a SERIALIZABLE transaction, retrying on conflicts.
func (e *Engine) Update(ctx context.Context, fn func(meta.Tx) error) error {
	backoff := time.Millisecond
	for attempt := 1; ; attempt++ {
		err := e.run(ctx, pgx.TxOptions{IsoLevel: pgx.Serializable}, true, fn)
		if !errors.Is(err, meta.ErrRetry) {
			return err
		}
		if attempt == maxAttempts {
			return fmt.Errorf("postgres: gave up after %d attempts: %w", attempt, err)
		}
		d := backoff/2 + rand.N(backoff)
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return ctx.Err()
		}
		backoff = min(2*backoff, 20*time.Millisecond)
	}
}

// View runs fn in a REPEATABLE READ READ ONLY transaction.
func (e *Engine) View(ctx context.Context, fn func(meta.Tx) error) error {
	return e.run(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, false, fn)
}

// run runs one attempt. A conflict anywhere (in fn's statements, in the
// batch of its writes, or at commit) is returned wrapping meta.ErrRetry;
// fn's own errors unchanged.
func (e *Engine) run(ctx context.Context, opts pgx.TxOptions, write bool, fn func(meta.Tx) error) error {
	c, err := e.acquire(ctx)
	if err != nil {
		return err
	}
	defer e.release(c)
	tx, err := c.BeginTx(ctx, opts)
	if err != nil {
		return conflict(fmt.Errorf("postgres: begin: %w", err))
	}
	t := &txn{ctx: ctx, tx: tx, write: write}
	err = fn(t)
	if err == nil {
		err = t.flush()
	}
	if err != nil {
		tx.Rollback(context.Background()) //nolint:errcheck // the error that matters is fn's
		if t.conflict != nil {
			return t.conflict // fn failed because the transaction aborted
		}
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return conflict(fmt.Errorf("postgres: commit: %w", err))
	}
	return nil
}

func conflict(err error) error {
	if retryable(err) {
		return fmt.Errorf("%w: %w", meta.ErrRetry, err)
	}
	return err
}

// txn is a meta.Tx on a pgx transaction. Its writes wait in pending
// until the transaction commits (or a Scan needs them in the database) and
// then go to the server in one batch: one round trip instead of one per
// write (a create writes six keys). Gets see pending writes first.
type txn struct {
	ctx      context.Context
	tx       pgx.Tx
	write    bool
	conflict error             // first serialization failure seen; the tx is aborted
	pending  map[string][]byte // key -> value to write; nil: delete
}

var _ meta.Tx = (*txn)(nil)

func (t *txn) check(err error) error {
	if err == nil {
		return nil
	}
	err = conflict(err)
	if errors.Is(err, meta.ErrRetry) && t.conflict == nil {
		t.conflict = err
	}
	return err
}

func (t *txn) Get(key []byte) ([]byte, error) {
	if v, ok := t.pending[string(key)]; ok {
		if v == nil {
			return nil, meta.ErrNoKey
		}
		return append([]byte{}, v...), nil
	}
	var v []byte
	err := t.tx.QueryRow(t.ctx, `SELECT v FROM kv WHERE k = $1`, key).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, meta.ErrNoKey
	}
	if err != nil {
		return nil, t.check(fmt.Errorf("postgres get: %w", err))
	}
	if v == nil {
		v = []byte{}
	}
	return v, nil
}

var errReadOnly = errors.New("postgres: write in a View transaction")

func (t *txn) Put(key, value []byte) error {
	if !t.write {
		return errReadOnly
	}
	t.buffer(key, append([]byte{}, value...)) // never nil: nil marks a delete
	return nil
}

func (t *txn) Delete(key []byte) error {
	if !t.write {
		return errReadOnly
	}
	t.buffer(key, nil)
	return nil
}

func (t *txn) buffer(key, value []byte) {
	if t.pending == nil {
		t.pending = make(map[string][]byte)
	}
	t.pending[string(key)] = value
}

// flush sends the pending writes in one batch, in key order (so that two
// transactions writing the same keys lock them in the same order).
func (t *txn) flush() error {
	if len(t.pending) == 0 {
		return nil
	}
	keys := make([]string, 0, len(t.pending))
	for k := range t.pending {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b := &pgx.Batch{}
	for _, k := range keys {
		if v := t.pending[k]; v != nil {
			b.Queue(`INSERT INTO kv (k, v) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v`, []byte(k), v)
		} else {
			b.Queue(`DELETE FROM kv WHERE k = $1`, []byte(k))
		}
	}
	clear(t.pending)
	br := t.tx.SendBatch(t.ctx, b)
	for range keys {
		if _, err := br.Exec(); err != nil {
			br.Close()
			return t.check(wrap("write", err))
		}
	}
	return t.check(wrap("write", br.Close()))
}

func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("postgres %s: %w", op, err)
}

// scanChunk is how many rows Scan reads per query; a pgx connection cannot
// run another statement while rows are open, so fn sees a chunk at a time.
const scanChunk = 256

func (t *txn) Scan(start, end []byte, limit int, fn func(key, value []byte) bool) error {
	if err := t.flush(); err != nil {
		return err
	}
	if start == nil {
		start = []byte{}
	}
	for {
		n := scanChunk
		if limit > 0 {
			n = min(n, limit)
		}
		var rows pgx.Rows
		var err error
		if end == nil {
			rows, err = t.tx.Query(t.ctx, `SELECT k, v FROM kv WHERE k >= $1 ORDER BY k LIMIT $2`, start, n)
		} else {
			rows, err = t.tx.Query(t.ctx, `SELECT k, v FROM kv WHERE k >= $1 AND k < $2 ORDER BY k LIMIT $3`, start, end, n)
		}
		if err != nil {
			return t.check(wrap("scan", err))
		}
		type pair struct{ k, v []byte }
		chunk := make([]pair, 0, n)
		for rows.Next() {
			var p pair
			if err := rows.Scan(&p.k, &p.v); err != nil {
				rows.Close()
				return t.check(wrap("scan", err))
			}
			chunk = append(chunk, p)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return t.check(wrap("scan", err))
		}
		for _, p := range chunk {
			if p.v == nil {
				p.v = []byte{}
			}
			if !fn(p.k, p.v) {
				return nil
			}
		}
		if limit > 0 {
			limit -= len(chunk)
			if limit == 0 {
				return nil
			}
		}
		if len(chunk) < n {
			return nil
		}
		start = append(chunk[len(chunk)-1].k, 0)
	}
}
