package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"poolfs/internal/meta"
)

// Leases: table mgmt_lease holds one row per lease name: its holder (an id
// unique to one process), the holder's address, the term (raised each time
// the lease changes hands; created with the other tables, owner.go) and the expiry, in the database's clock (now()),
// never a host's. Whoever holds an unexpired row leads; PostgreSQL is the
// only arbiter.
const leaseSchema = `CREATE TABLE IF NOT EXISTS mgmt_lease (
	name   text PRIMARY KEY,
	holder text NOT NULL,
	addr   text NOT NULL,
	term   bigint NOT NULL,
	expiry timestamptz NOT NULL)`

// acquireLeaseSQL takes the lease if it is free or expired, or renews it
// if the caller holds it, in one statement; the term goes up when the
// holder changes. It returns no row when another holder's lease runs.
const acquireLeaseSQL = `INSERT INTO mgmt_lease AS l (name, holder, addr, term, expiry)
	VALUES ($1, $2, $3, 1, now() + $4 * interval '1 millisecond')
	ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, addr = EXCLUDED.addr,
		term = CASE WHEN l.holder = EXCLUDED.holder THEN l.term ELSE l.term + 1 END,
		expiry = EXCLUDED.expiry
	WHERE l.expiry < now() OR l.holder = EXCLUDED.holder
	RETURNING term`

// LeaseState is a lease as one statement saw it.
type LeaseState struct {
	Held   bool   // the caller holds it
	Term   uint64 // the term of the holder
	Holder string // holder id ("" if nobody ever held it)
	Addr   string // the holder's address
	Valid  bool   // the holder's lease has not expired
}

// ErrLeaseLost is returned by a transaction fenced with LeaseFence whose
// lease is no longer held: its holder was deposed or let it expire.
var ErrLeaseLost = errors.New("postgres: lease lost")

// AcquireLease takes lease name for holder (at addr) for ttl, or renews
// it, and reports who holds it afterwards.
func (e *Engine) AcquireLease(ctx context.Context, name, holder, addr string, ttl time.Duration) (LeaseState, error) {
	c, err := e.acquire(ctx)
	if err != nil {
		return LeaseState{}, err
	}
	defer e.release(c)
	var term int64
	err = c.QueryRow(ctx, acquireLeaseSQL, name, holder, addr, ttl.Milliseconds()).Scan(&term)
	if err == nil {
		return LeaseState{Held: true, Term: uint64(term), Holder: holder, Addr: addr, Valid: true}, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return LeaseState{}, wrap("acquire lease", err)
	}
	var st LeaseState
	err = c.QueryRow(ctx, `SELECT holder, addr, term, expiry > now() FROM mgmt_lease WHERE name = $1`, name).
		Scan(&st.Holder, &st.Addr, &term, &st.Valid)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return LeaseState{}, wrap("read lease", err)
	}
	st.Term = uint64(term)
	return st, nil
}

// ReleaseLease gives up lease name if holder holds it, so that another
// takes it at once rather than after the expiry.
func (e *Engine) ReleaseLease(ctx context.Context, name, holder string) error {
	c, err := e.acquire(ctx)
	if err != nil {
		return err
	}
	defer e.release(c)
	_, err = c.Exec(ctx, `UPDATE mgmt_lease SET expiry = now() - interval '1 second' WHERE name = $1 AND holder = $2`, name, holder)
	return wrap("release lease", err)
}

// LeaseFence returns a meta.Fence that lets a transaction of this engine
// commit only while holder holds lease name in term, unexpired: it reads
// the lease row in the transaction itself (SERIALIZABLE), so a write
// either happens before the lease changes hands or is refused with
// ErrLeaseLost.
func (e *Engine) LeaseFence(name, holder string, term uint64) meta.Fence {
	return func(tx meta.Tx) error {
		if s, ok := tx.(*specTx); ok {
			return s.refuse() // the lease is read in the transaction
		}
		t, ok := tx.(*txn)
		if !ok {
			return fmt.Errorf("postgres: lease fence on a %T transaction", tx)
		}
		var n int
		err := t.queryRow(`SELECT count(*) FROM mgmt_lease WHERE name = $1 AND holder = $2 AND term = $3 AND expiry > now()`,
			[]any{name, holder, int64(term)}, &n)
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("%w: %s no longer holds lease %s in term %d", ErrLeaseLost, holder, name, term)
		}
		return nil
	}
}

// queryRow runs a query of one row in the transaction, beginning it if
// needed (BEGIN goes in the same round trip).
func (t *txn) queryRow(sql string, args []any, dest ...any) error {
	if err := t.flush(false); err != nil {
		return err
	}
	var err error
	if t.begun {
		err = t.c.QueryRow(t.ctx, sql, args...).Scan(dest...)
	} else {
		b := &pgx.Batch{}
		b.Queue(t.begin)
		b.Queue(sql, args...)
		br := t.c.SendBatch(t.ctx, b)
		if _, err = br.Exec(); err == nil {
			t.begun = true
			err = br.QueryRow().Scan(dest...)
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
	}
	return t.check(wrap("query", err))
}
