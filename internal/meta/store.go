package meta

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Store is the POSIX namespace and the stripe map, written once over an
// Engine. It is safe for concurrent use; several Stores (one per metadata
// server) may share one Engine whose Dialect is Shared. Every method is one
// Engine transaction, so it is atomic and retried by the engine on conflict.
type Store struct {
	e     Engine
	clock func() time.Time
	log   *slog.Logger
	inos  allocator // inode numbers
	gcs   allocator // GC queue sequence numbers
	// creates counts committed creates, to fold inode-count marks
	// every foldEvery (counts.go).
	creates atomic.Uint64
	boundSession
}

// New returns a Store over e. Call Init once before using the namespace.
func New(e Engine, o Options) *Store {
	s := &Store{e: e, clock: o.Clock, log: o.Logger}
	if s.clock == nil {
		s.clock = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s.inos = allocator{key: counterKey(ctrIno), first: uint64(RootIno) + 1, batch: inoBlock}
	s.gcs = allocator{key: counterKey(ctrGC), first: 1, batch: 1024}
	return s
}

// Engine returns the engine the Store runs on.
func (s *Store) Engine() Engine { return s.e }

func (s *Store) now() int64 { return s.clock().UnixNano() }

// op is the state of one Store transaction attempt: the engine transaction,
// allocator blocks reserved in it, and hooks to run once it has committed.
type op struct {
	s       *Store
	tx      Tx
	now     int64
	sid     SessionID // the session of the call (session.go)
	pending map[*allocator]*block
	commit  []func()
}

// update runs fn in one read-write transaction. Hooks registered by fn with
// onCommit run only if the transaction commits.
func (s *Store) update(ctx context.Context, fn func(o *op) error) error {
	var hooks []func()
	err := s.e.Update(ctx, func(tx Tx) error {
		o := &op{s: s, tx: tx, now: s.now(), sid: s.sessionOf(ctx)}
		err := fn(o)
		hooks = o.commit
		return err
	})
	if err != nil {
		return err
	}
	for _, h := range hooks {
		h()
	}
	return nil
}

func (s *Store) view(ctx context.Context, fn func(o *op) error) error {
	return s.e.View(ctx, func(tx Tx) error { return fn(&op{s: s, tx: tx, now: s.now()}) })
}

func (o *op) onCommit(f func()) { o.commit = append(o.commit, f) }

// prefetch reads keys in one request when the engine can (Prefetcher):
// the keys the transaction is about to Get.
func (o *op) prefetch(keys ...[]byte) error {
	if p, ok := o.tx.(Prefetcher); ok {
		return p.Prefetch(keys...)
	}
	return nil
}

// get returns the value of k, or (nil, false) if it is missing.
func (o *op) get(k []byte) ([]byte, bool, error) {
	v, err := o.tx.Get(k)
	if errors.Is(err, ErrNoKey) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return v, true, nil
}

func (o *op) inode(ino Ino) (inode, error) {
	v, ok, err := o.get(inodeKey(ino))
	if err != nil {
		return inode{}, err
	}
	if !ok {
		return inode{}, fmt.Errorf("inode %d: %w", ino, ErrNotFound)
	}
	return decodeInode(ino, v)
}

func (o *op) putInode(n *inode) error { return o.tx.Put(inodeKey(n.Ino), encodeInode(n)) }

// dir returns inode ino, which must be a directory.
func (o *op) dir(ino Ino) (inode, error) {
	n, err := o.inode(ino)
	if err != nil {
		return n, err
	}
	if n.Type != TypeDir {
		return n, fmt.Errorf("inode %d: %w", ino, ErrNotDir)
	}
	return n, nil
}

// lookup returns the dirent parent/name; ok is false if it does not exist.
func (o *op) lookup(parent Ino, name string) (Ino, FileType, bool, error) {
	v, ok, err := o.get(direntKey(parent, name))
	if err != nil || !ok {
		return 0, 0, false, err
	}
	ino, t, err := decodeDirent(v)
	return ino, t, err == nil, err
}

// empty reports whether directory ino has no entries (a scan with limit 1).
func (o *op) empty(ino Ino) (bool, error) {
	p := direntPrefix(ino)
	found := false
	err := o.tx.Scan(p, prefixEnd(p), 1, func(_, _ []byte) bool { found = true; return false })
	return !found, err
}

// addCounter adds delta to the signed counter at k.
func (o *op) addCounter(k []byte, delta int64) error {
	v, ok, err := o.get(k)
	if err != nil {
		return err
	}
	var cur uint64
	if ok {
		if cur, err = decodeU64(v); err != nil {
			return err
		}
	}
	return o.tx.Put(k, encodeU64(uint64(int64(cur)+delta)))
}

// sumCounters returns the sum of the signed counters p+shard, shard in
// [0, shards).
func (o *op) sumCounters(p []byte) (int64, error) {
	var sum int64
	if o.s.e.Dialect().CachedGets {
		for i := range byte(shards) {
			v, ok, err := o.get(append(p[:len(p):len(p)], i))
			if err != nil {
				return 0, err
			}
			if !ok {
				continue
			}
			n, err := decodeU64(v)
			if err != nil {
				return 0, err
			}
			sum += int64(n)
		}
		return sum, nil
	}
	var derr error
	err := o.tx.Scan(p, prefixEnd(p), 0, func(_, v []byte) bool {
		n, err := decodeU64(v)
		if err != nil {
			derr = err
			return false
		}
		sum += int64(n)
		return true
	})
	if err == nil {
		err = derr
	}
	return sum, err
}

// allocator hands out unique numbers (inode numbers, GC sequence numbers)
// from blocks reserved in the counter at key, so that concurrent
// transactions rarely touch that key.
type allocator struct {
	key   []byte
	first uint64 // value when the counter is missing
	batch uint64
	mu    struct {
		sync.Mutex
		next, end uint64 // [next, end) reserved and unused; guarded by mu
	}
}

type block struct{ next, end uint64 }

// take returns a number that no committed transaction can return again.
// When the Store's block is used up it reserves a new one inside o's
// transaction; the block becomes the Store's only once o commits.
func (a *allocator) take(o *op) (uint64, error) {
	if b := o.pending[a]; b != nil && b.next < b.end {
		b.next++
		return b.next - 1, nil
	}
	a.mu.Lock()
	if p, ok := o.tx.(Probe); ok {
		v, end := a.mu.next, a.mu.end
		a.mu.Unlock()
		if v += p.Ahead(a.key, 1); v < end {
			return v, nil // foreseen, not taken
		}
		a.mu.Lock()
	} else if a.mu.next < a.mu.end {
		v := a.mu.next
		a.mu.next++
		a.mu.Unlock()
		return v, nil
	}
	a.mu.Unlock()
	v, ok, err := o.get(a.key)
	if err != nil {
		return 0, err
	}
	start := a.first
	if ok {
		if start, err = decodeU64(v); err != nil {
			return 0, err
		}
	}
	b := &block{next: start + 1, end: start + a.batch}
	if err := o.tx.Put(a.key, encodeU64(b.end)); err != nil {
		return 0, err
	}
	if o.pending == nil {
		o.pending = map[*allocator]*block{}
	}
	o.pending[a] = b
	o.onCommit(func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		if b.end-b.next > a.mu.end-a.mu.next {
			a.mu.next, a.mu.end = b.next, b.end
		}
	})
	return start, nil
}
