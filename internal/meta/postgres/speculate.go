package postgres

import (
	"errors"
	"slices"
	"sync"

	"poolfs/internal/meta"
)

// One round trip per transaction. The engine remembers the values its
// committed Update transactions read (and wrote over them): known. Before
// a call, or a group of calls, goes to the server, its functions run on a
// specTx, which answers their reads from known, and a key it does not
// know as absent (a guess). If every key guessed absent is one the calls
// then put (a create reads the name it takes), the calls' writes go to
// the server in one batch with BEGIN, a statement that checks the values
// assumed (expectSQL), and COMMIT: one round trip instead of two. The
// check is the transaction's first statement and reads every key assumed,
// so the transaction read what its functions saw, as if they had read it
// from the server: SERIALIZABLE holds as for any transaction. If a value
// differs (another metadata server changed it, or a guess was wrong), the
// check fails, nothing is written, the assumed keys are forgotten and
// the calls run as before (reads with BEGIN, writes with COMMIT). Calls
// whose functions scan, check a lease or fail (an error is decided on the
// server's values, never on memory's), or guess a key they do not put,
// also run as before, at no extra cost. A function run on a specTx takes
// inode numbers for real (a number taken by an attempt that fails is
// never used), which the Engine contract allows, as a retry does.
// Only Update transactions, one at a time (group.go), read and change
// known; Views never do.

// expectSQL fails (division by zero, errStale) unless every key of $1
// holds the value at the same index of $2 (NULL: the key is absent). A
// subquery per key reads it through the primary key's index, as a Get
// does.
const expectSQL = `SELECT 1 / (count(*) = 0)::int FROM unnest($1::bytea[], $2::bytea[]) AS x(k, v)
WHERE (SELECT kv.v FROM kv WHERE kv.k = x.k) IS DISTINCT FROM x.v`

// errStale is a transaction whose check found a value other than assumed.
var errStale = errors.New("postgres: a value read from memory had changed")

// errNoSpec stops a function on a specTx that cannot run there (it scans,
// or checks a lease).
var errNoSpec = errors.New("postgres: cannot run from memory")

// knownLimit bounds the values remembered: when the newer of the two
// generations of known holds this many, it becomes the older and the
// older is dropped (a key read again is moved to the newer).
const knownLimit = 1 << 13

// known is the engine's memory of committed values, by key: nil for a key
// known absent, otherwise the value (never nil).
type known struct {
	mu       sync.Mutex
	cur, old map[string][]byte // guarded by mu
}

func (k *known) get(key string) ([]byte, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if v, ok := k.cur[key]; ok {
		return v, true
	}
	v, ok := k.old[key]
	return v, ok
}

// remember records the values a committed transaction read, as it left
// them.
func (k *known) remember(vals map[string][]byte) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for key, v := range vals {
		if len(k.cur) >= knownLimit {
			k.old, k.cur = k.cur, make(map[string][]byte, knownLimit)
		}
		if k.cur == nil {
			k.cur = make(map[string][]byte)
		}
		k.cur[key] = v
		delete(k.old, key)
	}
}

// forget drops keys whose values were found changed.
func (k *known) forget(keys map[string][]byte) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for key := range keys {
		delete(k.cur, key)
		delete(k.old, key)
	}
}

// specTx is the meta.Tx of a run from memory: reads from known, writes
// kept, as in a group transaction, in a layer per function.
type specTx struct {
	known   *known
	assumed map[string][]byte // key -> value the functions saw in the database (nil: absent)
	guessed map[string]bool   // keys assumed absent without being known
	pending map[string][]byte // the writes of the functions that succeeded; nil: delete
	layer   map[string][]byte // the writes of the function running
	refused bool              // a function asked what cannot be answered from memory
}

var (
	_ meta.Tx         = (*specTx)(nil)
	_ meta.Prefetcher = (*specTx)(nil)
)

func (s *specTx) Get(key []byte) ([]byte, error) {
	k := string(key)
	v, ok := s.layer[k]
	if !ok {
		v, ok = s.pending[k]
	}
	if !ok {
		v, ok = s.assumed[k]
	}
	if !ok {
		v, ok = s.known.get(k)
		if !ok {
			s.guessed[k] = true
		}
		s.assumed[k] = v
	}
	if v == nil {
		return nil, meta.ErrNoKey
	}
	return append([]byte{}, v...), nil
}

func (s *specTx) Put(key, value []byte) error {
	s.layer[string(key)] = append([]byte{}, value...) // never nil: nil marks a delete
	return nil
}

func (s *specTx) Delete(key []byte) error {
	s.layer[string(key)] = nil
	return nil
}

func (s *specTx) Scan(start, end []byte, limit int, fn func(key, value []byte) bool) error {
	return s.refuse()
}

// Prefetch does nothing: the values are in memory, or guessed.
func (s *specTx) Prefetch(keys ...[]byte) error { return nil }

// refuse stops the function: it cannot run from memory.
func (s *specTx) refuse() error {
	s.refused = true
	return errNoSpec
}

// speculate runs the functions of batch from memory and, if they can run
// there, commits their writes in one round trip. settled reports whether
// the calls are done; errs then holds each one's outcome: its function's
// error, or the transaction's if it failed other than by a changed value
// or a conflict (as a COMMIT on a dropped connection, it may have
// committed: running the calls again could take a name twice). If not
// settled, nothing was written and the calls run as usual (a function may
// have run once more, as after a conflict).
func (e *Engine) speculate(batch []*request) (errs []error, settled bool) {
	s := &specTx{known: &e.known, assumed: map[string][]byte{}, guessed: map[string]bool{}, pending: map[string][]byte{}}
	errs = make([]error, len(batch))
	for i, r := range batch {
		if errs[i] = r.ctx.Err(); errs[i] != nil {
			continue
		}
		s.layer = map[string][]byte{}
		if err := r.fn(s); err != nil || s.refused {
			// A function's error comes from the server's values, not
			// from memory (and a function that failed must not have
			// its outcome rest on a guess): the calls run as usual.
			return nil, false
		}
		for k, v := range s.layer {
			s.pending[k] = v
		}
	}
	if !slices.ContainsFunc(batch, func(r *request) bool { return r.ctx.Err() == nil }) {
		return nil, false
	}
	for k := range s.guessed {
		if s.pending[k] == nil {
			return nil, false // a guess its calls do not write: likely wrong
		}
	}
	ctx, stop := groupContext(batch)
	defer stop()
	err := e.run(ctx, beginUpdate, true, func(tx meta.Tx) error {
		t := tx.(*txn)
		t.pending, t.read, t.expect = s.pending, s.assumed, true
		return nil
	})
	switch {
	case err == nil:
		e.stats.oneTrip.Add(1)
		if len(batch) > 1 {
			e.stats.groups.Add(1)
		}
		e.stats.updates.Add(uint64(len(batch)))
		return errs, true
	case errors.Is(err, errStale):
		e.stats.stale.Add(1)
		e.known.forget(s.assumed)
		return nil, false
	case errors.Is(err, meta.ErrRetry):
		e.stats.retries.Add(1)
		return nil, false
	}
	for i := range errs {
		if errs[i] == nil {
			errs[i] = err
		}
	}
	return errs, true
}

// expectArgs returns the keys and values of read in key order: the
// arguments of expectSQL.
func expectArgs(read map[string][]byte) (keys, vals [][]byte) {
	ks := make([]string, 0, len(read))
	for k := range read {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	for _, k := range ks {
		keys = append(keys, []byte(k))
		vals = append(vals, read[k])
	}
	return keys, vals
}
