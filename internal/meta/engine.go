package meta

import (
	"context"
	"errors"
)

// Engine is the small transactional key-value store that the namespace logic
// (package meta, written once) runs on. SQLite and PostgreSQL implement it in
// internal/meta/sqlite and internal/meta/postgres; a distributed transactional
// store (TiKV, FoundationDB, distributed SQL) fits the same contract.
//
// Keys and values are opaque byte strings ordered bytewise. Transactions are
// serializable. An implementation that detects a conflict returns an error
// wrapping ErrRetry from the function's Commit, and Update re-runs fn.
type Engine interface {
	// Update runs fn in a read-write serializable transaction and commits it.
	// fn may be called more than once (after a conflict) and must not have
	// side effects outside tx. If fn returns an error the transaction is
	// rolled back and that error is returned unchanged.
	Update(ctx context.Context, fn func(tx Tx) error) error
	// View runs fn in a read-only transaction (a consistent snapshot).
	// Like Update's, fn may be called more than once (an engine that
	// answers from a cache may start again on the database).
	View(ctx context.Context, fn func(tx Tx) error) error
	// Dialect describes the engine's name and capabilities.
	Dialect() Dialect
	// Close releases the engine. Transactions after Close fail.
	Close() error
}

// Tx is one transaction. It is not safe for concurrent use and is valid only
// inside the function passed to Update or View.
type Tx interface {
	// Get returns the value of key, or an error wrapping ErrNoKey.
	// The caller owns the returned slice.
	Get(key []byte) ([]byte, error)
	// Put sets key to value. Fails in a View transaction.
	Put(key, value []byte) error
	// Delete removes key; deleting a missing key is not an error.
	Delete(key []byte) error
	// Scan calls fn for each key in [start, end) in ascending order (end nil:
	// no upper bound), at most limit pairs (limit <= 0: no limit), until fn
	// returns false. The slices passed to fn are valid only during the call.
	Scan(start, end []byte, limit int, fn func(key, value []byte) bool) error
}

// Prefetcher is a Tx that reads several keys in one request to its
// server. Prefetch reads keys (present or absent) into the transaction, so
// that their Gets ask the server nothing more; it is a hint with Get's
// semantics: the values are those Get would return at that point, and a
// key written in the transaction afterwards reads as written. An engine
// whose Gets are cheap need not implement it.
type Prefetcher interface {
	Prefetch(keys ...[]byte) error
}

// Probe is a Tx on which an engine runs a function only to learn the keys
// it reads first (its first Prefetch or Get), so as to read several
// functions' keys in one request before running them for real: every call
// fails, and the function's work is thrown away. A function run on a
// Probe takes nothing from shared state: an inode number is not taken but
// foreseen, as the number the call will take if the calls probed before it
// (whose takes Ahead counts) run first.
type Probe interface {
	// Ahead returns how many numbers of the counter at key the functions
	// probed before took, and counts n more.
	Ahead(key []byte, n uint64) uint64
}

// Dialect is what differs between engines, as data rather than branches.
type Dialect struct {
	Name string // "sqlite", "postgres"
	// Shared is true when several metadata servers may use the same store
	// at once (PostgreSQL); false for an embedded single-process store.
	Shared bool
	// CachedGets is true when Tx.Get of a committed key is answered from
	// memory (the embedded SQLite engine's cache of committed values), so
	// that a few Gets cost less than one Scan: the sharded counters are
	// then summed by Gets (a Scan per commit was 15% of the CPU of a
	// small-file create).
	CachedGets bool
}

// ErrNoKey is returned (wrapped) by Tx.Get for a missing key.
var ErrNoKey = errors.New("meta: no such key")

// ErrRetry marks a transaction conflict; Update retries on it.
var ErrRetry = errors.New("meta: transaction conflict, retry")
