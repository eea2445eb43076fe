package sqlite

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"poolfs/internal/meta"
)

// View runs fn in a read transaction: on the cache while it knows every
// key fn reads, else on a SQLite snapshot (a WAL read transaction).
func (e *Engine) View(ctx context.Context, fn func(meta.Tx) error) error {
	select {
	case <-e.quit:
		return errClosed
	default:
	}
	if e.cache == nil {
		return e.viewSQL(ctx, fn)
	}
	if err := e.failure(); err != nil {
		return err
	}
	t := &viewTxn{e: e, ctx: ctx, gen: e.cache.generation(), seen: writeSet{}}
	err := fn(t)
	if t.sql != nil {
		t.sql.tx.Rollback() //nolint:errcheck // read-only
		e.cache.fill(t.fillGen, t.sql.reads)
	}
	if t.writer {
		// The cache lacked a key while it held updates SQLite has not
		// committed yet: read where they are.
		return e.viewOnWriter(ctx, fn)
	}
	if t.conflict {
		// The cache and the snapshot disagreed on a key fn had read:
		// start again on SQLite alone (rare: a commit changed a key this
		// View read, and then the View read a key the cache lacked).
		return e.viewSQL(ctx, fn)
	}
	return err
}

// viewSQL runs fn on a SQLite snapshot, filling the cache with what it read.
func (e *Engine) viewSQL(ctx context.Context, fn func(meta.Tx) error) error {
	var gen uint64
	if e.cache != nil {
		gen = e.cache.generation()
	}
	if e.dirty(gen) {
		return e.viewOnWriter(ctx, fn)
	}
	t, err := e.beginView(ctx)
	if err != nil {
		return err
	}
	defer t.tx.Rollback() //nolint:errcheck // read-only
	err = fn(t)
	if e.cache != nil {
		e.cache.fill(gen, t.reads)
	}
	return err
}

func (e *Engine) beginView(ctx context.Context) (*txn, error) {
	tx, err := e.rdb.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("sqlite view: %w", err)
	}
	t := &txn{ctx: ctx, tx: tx, base: &e.r}
	if e.cache != nil {
		t.reads = writeSet{}
	}
	return t, nil
}

// errViewConflict ends a View attempt that must start again on SQLite.
var errViewConflict = errors.New("sqlite: view conflict, retry")

// viewTxn is a View transaction that reads the cache as of generation gen
// until a key is missing there, then a SQLite snapshot, which it first
// checks against everything it has returned so far (seen): a View sees one
// committed state.
type viewTxn struct {
	e        *Engine
	ctx      context.Context
	gen      uint64
	seen     writeSet // values returned so far, nil: absent
	sql      *txn     // the SQLite snapshot, once needed
	fillGen  uint64   // generation before sql began
	atGen    bool     // sql is known to be the state at gen: the cache still serves
	conflict bool
	writer   bool // with linger: the engine was dirty, run on the write connection
}

var _ meta.Tx = (*viewTxn)(nil)

func (t *viewTxn) Get(key []byte) ([]byte, error) {
	if v, ok := t.seen[string(key)]; ok {
		return clone(v)
	}
	if t.sql == nil || t.atGen {
		if v, hit := t.e.cache.getAt(key, t.gen); hit {
			t.seen[string(key)] = v
			return clone(v)
		}
	}
	if t.sql == nil {
		if err := t.toSQL(); err != nil {
			return nil, err
		}
	}
	v, err := t.sql.Get(key)
	if len(t.seen) == 0 && t.gen%2 == 0 && t.e.cache.generation() == t.gen {
		// No commit began between gen and this first read, which began
		// the snapshot: it is the state at gen, and so is the cache.
		t.atGen = true
	}
	switch {
	case errors.Is(err, meta.ErrNoKey):
		t.seen[string(key)] = nil
	case err == nil:
		t.seen[string(key)] = append([]byte{}, v...)
	}
	return v, err
}

func clone(v []byte) ([]byte, error) {
	if v == nil {
		return nil, meta.ErrNoKey
	}
	return append([]byte{}, v...), nil
}

func (t *viewTxn) Put(key, value []byte) error { return errReadOnly }
func (t *viewTxn) Delete(key []byte) error     { return errReadOnly }

func (t *viewTxn) Scan(start, end []byte, limit int, fn func(key, value []byte) bool) error {
	if t.sql == nil {
		if err := t.toSQL(); err != nil {
			return err
		}
	}
	return t.sql.Scan(start, end, limit, fn)
}

// toSQL opens the SQLite snapshot. It agrees with the cache as of gen if
// no commit began since gen (even), else it must agree with every value
// already returned.
func (t *viewTxn) toSQL() error {
	if t.conflict || t.writer {
		return errViewConflict
	}
	t.fillGen = t.e.cache.generation()
	if t.e.dirty(t.fillGen) {
		t.writer = true
		return errViewConflict
	}
	s, err := t.e.beginView(t.ctx)
	if err != nil {
		return err
	}
	t.sql = s
	if len(t.seen) == 0 {
		return nil
	}
	// The snapshot begins at its first read.
	for k, want := range t.seen {
		got, err := s.Get([]byte(k))
		if err != nil && !errors.Is(err, meta.ErrNoKey) {
			return err
		}
		if t.gen%2 == 0 && t.e.cache.generation() == t.gen {
			t.atGen = true // no commit since gen: the snapshot is the state at gen
			return nil
		}
		if (want == nil) != (got == nil) || !bytes.Equal(want, got) {
			t.conflict = true
			return errViewConflict
		}
	}
	return nil
}
