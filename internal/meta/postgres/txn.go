package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"poolfs/internal/meta"
)

// Transactions are driven with SQL on a plain connection rather than
// through pgx.Tx, so that BEGIN travels with the first statement and
// COMMIT with the batch of writes: a View of one key is two round trips
// (BEGIN and the SELECT together, then COMMIT), an Update its reads plus
// one (the writes and COMMIT together).
const (
	beginUpdate = `BEGIN ISOLATION LEVEL SERIALIZABLE`
	beginView   = `BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY`
	getSQL      = `SELECT v FROM kv WHERE k = $1`
	// putsSQL writes a run of keys in one statement, in the order of the
	// arrays (key order); deletesSQL deletes a run (an index scan of ANY
	// visits the keys in order).
	putsSQL    = `INSERT INTO kv (k, v) SELECT * FROM unnest($1::bytea[], $2::bytea[]) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v`
	deletesSQL = `DELETE FROM kv WHERE k = ANY($1)`
)

// run runs one attempt. A conflict anywhere (in fn's statements, in the
// batch of its writes, or at commit) is returned wrapping meta.ErrRetry;
// fn's own errors unchanged. A transaction left open by an error is
// rolled back; a connection that cannot be is closed by release.
func (e *Engine) run(ctx context.Context, begin string, write bool, fn func(meta.Tx) error) error {
	c, err := e.acquire(ctx)
	if err != nil {
		return err
	}
	defer e.release(c)
	t := &txn{e: e, ctx: ctx, c: c, begin: begin, write: write}
	err = fn(t)
	if err == nil {
		err = t.flush(true)
	}
	if err == nil && write {
		e.known.remember(t.read)
	}
	if err != nil {
		if !c.IsClosed() && c.PgConn().TxStatus() != 'I' {
			rctx, cancel := context.WithTimeout(context.Background(), rollbackTimeout)
			e.sent(1)
			c.Exec(rctx, `ROLLBACK`) //nolint:errcheck // release closes a connection still in a transaction
			cancel()
		}
		if errors.Is(t.failed, meta.ErrRetry) {
			return t.failed // fn failed because the transaction aborted
		}
		return err
	}
	return nil
}

// rollbackTimeout bounds the ROLLBACK after a failed attempt; a server
// that does not answer costs the connection, not a stuck caller.
const rollbackTimeout = 5 * time.Second

func conflict(err error) error {
	if retryable(err) {
		return fmt.Errorf("%w: %w", meta.ErrRetry, err)
	}
	return err
}

// txn is a meta.Tx: a transaction on one connection, begun with its first
// statement. Its writes wait in pending until it commits (or a Scan needs
// them in the database) and then go to the server in one batch, in key
// order (so that two transactions writing the same keys lock them in the
// same order), each run of puts or of deletes one statement. Gets see
// pending writes first.
type txn struct {
	e       *Engine
	ctx     context.Context
	c       *pgx.Conn
	begin   string // the BEGIN statement, sent with the first statement
	begun   bool
	write   bool
	failed  error             // first statement error (a conflict: ErrRetry); the tx must not commit
	pending map[string][]byte // key -> value to write; nil: delete
	read    map[string][]byte // key -> value read (prefetched or got), as written since; nil: absent
	// expect makes the transaction's first statement check that the
	// keys of read hold those values (speculate.go): its functions ran
	// from memory, and the transaction is one round trip.
	expect bool
	// layer holds the writes of the function running in a group
	// transaction (group.go), nil outside one; layerSent is set when a
	// flush sent them to the server (they can no longer be dropped).
	layer     map[string][]byte
	layerSent bool
}

var _ meta.Tx = (*txn)(nil)

// check classifies a statement's error and remembers the first one, so
// that the transaction cannot commit even if fn carries on without it
// (its writes may rest on a read that failed, or have been lost with a
// failed batch).
func (t *txn) check(err error) error {
	if err == nil {
		return nil
	}
	err = conflict(err)
	if t.failed == nil {
		t.failed = err
	}
	return err
}

func (t *txn) Get(key []byte) ([]byte, error) {
	if v, ok := t.layer[string(key)]; ok {
		if v == nil {
			return nil, meta.ErrNoKey
		}
		return append([]byte{}, v...), nil
	}
	if v, ok := t.pending[string(key)]; ok {
		if v == nil {
			return nil, meta.ErrNoKey
		}
		return append([]byte{}, v...), nil
	}
	if v, ok := t.read[string(key)]; ok {
		if v == nil {
			return nil, meta.ErrNoKey
		}
		return append([]byte{}, v...), nil
	}
	var v []byte
	var err error
	if t.begun {
		t.e.sent(1)
		err = t.c.QueryRow(t.ctx, getSQL, key).Scan(&v)
	} else {
		b := &pgx.Batch{}
		b.Queue(t.begin)
		b.Queue(getSQL, key)
		t.e.sent(b.Len())
		br := t.c.SendBatch(t.ctx, b)
		if _, err = br.Exec(); err == nil {
			t.begun = true
			err = br.QueryRow().Scan(&v)
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
	}
	if errors.Is(err, pgx.ErrNoRows) {
		t.readAs(key, nil)
		return nil, meta.ErrNoKey
	}
	if err != nil {
		return nil, t.check(fmt.Errorf("postgres get: %w", err))
	}
	if v == nil {
		v = []byte{}
	}
	t.readAs(key, v)
	return append([]byte{}, v...), nil
}

// readAs records the value Get read of key (nil: absent): Get answers it
// from memory next time, and the engine remembers it once the transaction
// commits (speculate.go).
func (t *txn) readAs(key, v []byte) {
	if t.read == nil {
		t.read = make(map[string][]byte)
	}
	t.read[string(key)] = v
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
	if t.layer != nil {
		t.layer[string(key)] = value
		return
	}
	if t.pending == nil {
		t.pending = make(map[string][]byte)
	}
	t.pending[string(key)] = value
}

// errRolledBack is a COMMIT the server answered with ROLLBACK: the
// transaction had failed (an error fn did not pass on).
var errRolledBack = errors.New("postgres: transaction failed, commit rolled back")

// flush sends, in one batch, BEGIN if the transaction has not begun, the
// pending writes, and COMMIT if commit is set. With nothing to send (a
// transaction that ran no statement) it does nothing.
func (t *txn) flush(commit bool) error {
	if t.failed != nil {
		return t.failed
	}
	if len(t.layer) > 0 {
		t.mergeLayer()
		t.layerSent = true
	}
	if !t.begun && len(t.pending) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	if !t.begun {
		b.Queue(t.begin)
	}
	expectAt := -1
	if t.expect && !t.begun && len(t.read) > 0 {
		ks, vs := expectArgs(t.read)
		expectAt = b.Len()
		b.Queue(expectSQL, ks, vs)
	}
	keys := make([]string, 0, len(t.pending))
	for k := range t.pending {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	// Each run of puts (or of deletes) in key order is one statement: a
	// create's five writes, or a whole group's, are one INSERT.
	for len(keys) > 0 {
		put := t.pending[keys[0]] != nil
		n := 1
		for n < len(keys) && (t.pending[keys[n]] != nil) == put {
			n++
		}
		ks, vs := make([][]byte, n), make([][]byte, 0, n)
		for i, k := range keys[:n] {
			ks[i] = []byte(k)
			if put {
				vs = append(vs, t.pending[k])
			}
			if _, ok := t.read[k]; ok {
				t.read[k] = t.pending[k] // what was prefetched is superseded
			}
		}
		if put {
			b.Queue(putsSQL, ks, vs)
		} else {
			b.Queue(deletesSQL, ks)
		}
		keys = keys[n:]
	}
	if commit {
		b.Queue(`COMMIT`)
	}
	clear(t.pending)
	t.e.sent(b.Len())
	br := t.c.SendBatch(t.ctx, b)
	for i := range b.Len() {
		tag, err := br.Exec()
		if err == nil && i == 0 {
			t.begun = true
		}
		if err == nil && commit && i == b.Len()-1 && tag.String() != "COMMIT" {
			err = errRolledBack
		}
		if err != nil && i == expectAt && divisionByZero(err) {
			err = errStale
		}
		if err != nil {
			br.Close()
			return t.check(wrap("commit", err))
		}
	}
	return t.check(wrap("commit", br.Close()))
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
	if err := t.flush(false); err != nil {
		return err
	}
	if !t.begun {
		t.e.sent(1)
		if _, err := t.c.Exec(t.ctx, t.begin); err != nil {
			return t.check(wrap("begin", err))
		}
		t.begun = true
	}
	return meta.ScanChunks(start, limit, scanChunk, func(start []byte, n int) ([]meta.Pair, error) {
		var rows pgx.Rows
		var err error
		t.e.sent(1)
		if end == nil {
			rows, err = t.c.Query(t.ctx, `SELECT k, v FROM kv WHERE k >= $1 ORDER BY k LIMIT $2`, start, n)
		} else {
			rows, err = t.c.Query(t.ctx, `SELECT k, v FROM kv WHERE k >= $1 AND k < $2 ORDER BY k LIMIT $3`, start, end, n)
		}
		if err != nil {
			return nil, t.check(wrap("scan", err))
		}
		defer rows.Close()
		out := make([]meta.Pair, 0, n)
		for rows.Next() {
			var p meta.Pair
			if err := rows.Scan(&p.K, &p.V); err != nil {
				return nil, t.check(wrap("scan", err))
			}
			out = append(out, p)
		}
		if err := rows.Err(); err != nil {
			return nil, t.check(wrap("scan", err))
		}
		return out, nil
	}, fn)
}
