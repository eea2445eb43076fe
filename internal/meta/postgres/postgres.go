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
// round trips, not one per key written. Reads a Store operation knows in
// advance come in one statement sent with BEGIN (Prefetch, prefetch.go):
// a create is two round trips. One Update transaction runs at a time;
// the calls that arrive meanwhile commit together in the next one, each
// keeping its own outcome (group commit, group.go), so an engine's
// creators never abort each other. A group reads every call's first keys
// with its BEGIN (each function is first run on a meta.Probe that records
// them, probe.go): a group of creates is two round trips, however many
// it holds. Once the keys a call or group reads are known (the engine
// remembers what its committed Updates read), it is one: the functions
// run from memory and BEGIN, a statement that checks every value they
// assumed, their writes and COMMIT go in one batch; a value another
// server changed fails the check, and the calls run as above
// (speculate.go). Stats (stats.go) counts round trips,
// statements, groups, conflict retries, one-round-trip transactions and
// failed checks.
//
// Durability is the server's: a commit returns after the WAL flush
// (synchronous_commit=on, the default), or, with synchronous_commit=off in
// the URL, at the next Sync (sync.go).
//
// A database serves one cluster: Open binds a new one to its caller's
// cluster id, in the transaction that creates the tables (table
// poolfs_cluster, one row), and refuses any other cluster (owner.go).
//
// Passwords: Open takes the password, as libpq does, from the connection
// string, PGPASSWORD, a password file or a service file; no error, and
// nothing that shows a connection string, shows it (Redact, redact.go).
//
// Leases (lease.go): table mgmt_lease holds named leases taken and renewed
// on the database's clock; LeaseFence makes a transaction commit only while
// its writer holds a lease, so several management services can share the
// database and only the leader writes the map.
//
// Connections come from a small pool of pgx.Conn (pgxpool is not used: its
// puddle dependency is not in go.mod).
package postgres

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"poolfs/internal/meta"
)

// Engine is a meta.Engine on a PostgreSQL database.
type Engine struct {
	cfg   *pgx.ConnConfig
	owner binding       // the database's owner (owner.go)
	sem   chan struct{} // one token per open connection allowed
	stats counters      // stats.go
	group groupQueue    // group commit (group.go)
	known known         // values committed transactions read (speculate.go)
	mu    struct {
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

// sessionParams are the settings of the engine's connections, unless
// the connection string sets them. Every statement the engine sends reads
// kv by its key (one key, a list, or a range in key order), so one plan
// fits any data: each prepared statement is planned once per connection
// (force_generic_plan) instead of at every execution, which took about a
// quarter of the server's time for a create, and always through the
// index (enable_seqscan off), which a plan made while the table was small
// would not use, and whose page-level predicate locks, unlike a whole-
// table scan's, do not conflict with every other writer.
var sessionParams = map[string]string{
	"plan_cache_mode": "force_generic_plan",
	"enable_seqscan":  "off",
}

const schema = `CREATE TABLE IF NOT EXISTS kv (k bytea PRIMARY KEY, v bytea NOT NULL)`

// Open connects to the database of dsn (a postgres:// URL or a
// keyword/value string; the password may come from PGPASSWORD, a password
// file or a service file, as with libpq), creates the tables if they are
// missing and binds the database to owner on first use (owner.go). It
// returns an error wrapping ErrOtherCluster (an *OwnerError) if the
// database belongs to another cluster. No error it returns shows a
// password.
func Open(ctx context.Context, dsn string, owner Owner) (*Engine, error) {
	if owner.ID == "" {
		return nil, errors.New("postgres: open needs the id of the cluster the database is for")
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, redactErr(fmt.Errorf("postgres: connection string %s: %w", Redact(dsn), err), "")
	}
	for k, v := range sessionParams {
		if _, ok := cfg.RuntimeParams[k]; !ok {
			cfg.RuntimeParams[k] = v
		}
	}
	e := &Engine{cfg: cfg, sem: make(chan struct{}, MaxConns)}
	b, err := e.init(ctx, owner)
	if err != nil {
		e.Close()
		return nil, redactErr(err, cfg.Password)
	}
	e.owner = b
	return e, nil
}

// init creates the schema and checks the binding on one connection.
func (e *Engine) init(ctx context.Context, owner Owner) (binding, error) {
	c, err := e.acquire(ctx)
	if err != nil {
		return binding{}, err
	}
	b, err := initSchema(ctx, c, owner)
	e.release(c)
	if err != nil {
		return b, fmt.Errorf("postgres: create tables: %w", err)
	}
	if b.owner.ID != owner.ID {
		owner.Since = time.Now()
		return b, &OwnerError{Owner: b.owner, Opener: owner}
	}
	return b, nil
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
		return nil, redactErr(fmt.Errorf("postgres: connect: %w", err), e.cfg.Password)
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

// divisionByZero reports whether err is expectSQL's failed check.
func divisionByZero(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "22012"
}

// retryable reports whether err is a serialization failure or deadlock.
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// updateAlone runs fn in a SERIALIZABLE transaction of its own,
// retrying on conflicts.
func (e *Engine) updateAlone(ctx context.Context, fn func(meta.Tx) error) error {
	if errs, settled := e.speculate([]*request{{ctx: ctx, fn: fn}}); settled {
		return errs[0]
	}
	backoff := time.Millisecond
	for attempt := 1; ; attempt++ {
		err := e.run(ctx, beginUpdate, true, fn)
		if !errors.Is(err, meta.ErrRetry) {
			if err == nil {
				e.stats.updates.Add(1)
			}
			return err
		}
		e.stats.retries.Add(1)
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
	return e.run(ctx, beginView, false, fn)
}
