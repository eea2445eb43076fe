package client

import (
	"container/list"
	"context"
	"slices"
	"sync"
	"sync/atomic"

	"poolfs/internal/chunkstore"
	"poolfs/internal/erasure"
	"poolfs/internal/placement"
	"poolfs/internal/stripeio"
)

// stripeCache keeps up to max whole stripes a handle read or is reading
// ahead, keyed by stripe and generation, with reads in progress shared.
// When full it evicts, of the stripes reads have copied every byte out
// of, the least recently used: their readers have moved on. Then stripes
// read ahead and not yet asked for (the one started last, furthest ahead
// of its reader), then stripes read in part (least recently used), and
// the stripes streams read next last (evictRank): with several streams on
// one file, evicting by position took the read-ahead stripes of the
// stream lowest in the file before its reader got to them, and with the
// readers of a strided file, the stripes the laggards had still to read.
// Readahead starts nothing that would evict a stripe not read through
// (room). It is guarded by the File's mutex, as are the entries' used and
// taken; the entries' bytes are read without it (see cacheEntry).
type stripeCache struct {
	max     int // the File sets it from its streams (cacheSizeLocked)
	tick    uint64
	entries map[uint64]*cacheEntry
}

// cacheEntry is one stripe read whole. Its fields other than refs are
// written once, by the reader that fills it, before ready is closed, and
// only read after. The fragment buffers go back to their pool when the
// last reference is dropped: the cache holds one while the entry is in it,
// the filler one until it is filled, and every reader copying out of it
// one.
type cacheEntry struct {
	gen   uint64
	ready chan struct{}
	refs  atomic.Int32
	// used is the cache's tick when a read last took it (or it was
	// started); taken says a read has (not only readahead).
	used  uint64
	taken bool
	// read counts the user bytes reads copied out of it: once it reaches
	// len, every reader of the stripe has (most likely) been served.
	read atomic.Int64

	b      *stripeBuf // nil after an error
	pool   *bufPool
	shards [][]byte // the k data shards, in b or reconstructed
	shard  int      // shard size
	len    int      // user bytes in the stripe
	err    error
	// release, if set (before the entry is shared), runs once the last
	// reference is dropped: a read-ahead stripe gives back its share of
	// the client's budget.
	release func()
	// cancel, if set (before the entry is shared), gives up its fill
	// (stripeCache.clear).
	cancel func()
}

func newCacheEntry(gen uint64, refs int32) *cacheEntry {
	e := &cacheEntry{gen: gen, ready: make(chan struct{})}
	e.refs.Store(refs)
	return e
}

func (e *cacheEntry) ref() { e.refs.Add(1) }

func (e *cacheEntry) unref() {
	if e.refs.Add(-1) != 0 {
		return
	}
	if e.b != nil {
		e.pool.put(e.b)
		e.b, e.shards = nil, nil
	}
	if e.release != nil {
		e.release()
	}
}

// wait returns when the entry is filled, or ctx is done.
func (e *cacheEntry) wait(ctx context.Context) error {
	select {
	case <-e.ready:
		return e.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// failed reports whether the entry is filled, with an error.
func (e *cacheEntry) failed() bool {
	select {
	case <-e.ready:
		return e.err != nil
	default:
		return false
	}
}

// copyOut copies the stripe's user bytes [at, at+len(dst)) into dst, zeros
// beyond its length. The entry is filled without error.
func (e *cacheEntry) copyOut(dst []byte, at int) {
	done := 0
	for pos := at; done < len(dst) && pos < e.len; {
		sh, o := pos/e.shard, pos%e.shard
		n := copy(dst[done:], e.shards[sh][o:min(e.shard, o+e.len-pos)])
		done += n
		pos += n
	}
	clear(dst[done:])
}

func newStripeCache(n int) *stripeCache {
	return &stripeCache{max: max(n, 2), entries: map[uint64]*cacheEntry{}}
}

// get returns the entry of stripe s at generation gen, with a reference
// the caller drops, or nil.
func (c *stripeCache) get(s, gen uint64) *cacheEntry {
	if e := c.entries[s]; e != nil && e.gen == gen {
		e.ref()
		c.tick++
		e.used, e.taken = c.tick, true
		return e
	}
	return nil
}

func (c *stripeCache) has(s uint64) bool { return c.entries[s] != nil }

// filling is how many entries are still being read.
func (c *stripeCache) filling() int {
	n := 0
	for _, e := range c.entries {
		select {
		case <-e.ready:
		default:
			n++
		}
	}
	return n
}

// filled reports whether the cache holds stripe s at generation gen, read
// without error.
func (c *stripeCache) filled(s, gen uint64) bool {
	e := c.entries[s]
	if e == nil || e.gen != gen {
		return false
	}
	select {
	case <-e.ready:
		return e.err == nil
	default:
		return false
	}
}

// start adds an entry for stripe s that the caller fills; taken says a
// read waits for it (else it is read ahead). busy are the stripes the
// File's streams read next, evicted last. The entry holds a reference for
// the cache and one for the filler, which drops it once ready is closed.
func (c *stripeCache) start(s, gen uint64, taken bool, busy []uint64) *cacheEntry {
	e := newCacheEntry(gen, 2)
	c.tick++
	e.used, e.taken = c.tick, taken
	if old, ok := c.entries[s]; ok {
		old.unref()
	}
	c.entries[s] = e
	for len(c.entries) > c.max {
		c.drop(c.victim(s, busy))
	}
	return e
}

// consumed reports whether the entry is filled and reads have copied out
// as many bytes as it holds (or it failed): nobody waits for it any more.
func (e *cacheEntry) consumed() bool {
	select {
	case <-e.ready:
		return e.err != nil || e.read.Load() >= int64(e.len)
	default:
		return false
	}
}

// Eviction ranks (evictRank), lowest evicted first.
const (
	rankConsumed = iota // every byte read: its readers have moved on
	rankAhead           // read ahead, not yet taken
	rankPartly          // taken, but bytes of it not yet read (the other readers of a strided file)
	rankBusy            // where a stream reads next
)

// evictRank orders entries for eviction: stripes read through, then
// stripes read ahead and not yet taken, then stripes read in part (with
// several readers of a strided file, the laggards' stripes), then the
// stripes streams are in.
func evictRank(x uint64, e *cacheEntry, busy []uint64) int {
	switch {
	case slices.Contains(busy, x):
		return rankBusy
	case e.consumed():
		return rankConsumed
	case e.taken:
		return rankPartly
	default:
		return rankAhead
	}
}

// victim is the stripe to evict, other than keep: of the lowest evictRank,
// the least recently used, or of stripes read ahead the one started last
// (furthest ahead of its reader).
func (c *stripeCache) victim(keep uint64, busy []uint64) uint64 {
	var v uint64
	var ve *cacheEntry
	vr := 0
	for x, e := range c.entries {
		if x == keep {
			continue
		}
		r := evictRank(x, e, busy)
		older := e.used < ve.usedOr(e.used)
		if r == rankAhead {
			older = e.used > ve.usedOr(e.used)
		}
		if ve == nil || r < vr || r == vr && older {
			v, ve, vr = x, e, r
		}
	}
	return v
}

func (e *cacheEntry) usedOr(d uint64) uint64 {
	if e == nil {
		return d
	}
	return e.used
}

// room reports whether a stripe read ahead can be added without evicting
// one that is not yet read through.
func (c *stripeCache) room(busy []uint64) bool {
	if len(c.entries) < c.max {
		return true
	}
	for x, e := range c.entries {
		if evictRank(x, e, busy) == rankConsumed {
			return true
		}
	}
	return false
}

func (c *stripeCache) drop(s uint64) {
	if e, ok := c.entries[s]; ok {
		e.unref()
		delete(c.entries, s)
	}
}

// clear drops every entry, and gives up the fills of those that only the
// cache and their filler hold (read ahead, no read waiting): when the
// File is closed, what is still being read ahead would never be read.
// Over a busy link, the stripes a reader had in flight past the end of
// its part of a shared file were otherwise all fetched for nothing.
func (c *stripeCache) clear() {
	for _, e := range c.entries {
		if e.cancel != nil && e.refs.Load() == 2 {
			e.cancel()
		}
		e.unref()
	}
	c.entries = map[uint64]*cacheEntry{}
}

// headerCache remembers decoded fragment headers. Fragment keys name
// immutable bytes, so an entry never goes stale. It is split into
// headerShards LRU lists by key, each with its own lock: every ranged read
// looks a header up, and under random 4 KiB writes the one lock was where
// the folds' and readers' goroutines waited most (`--mutexprofile`).
type headerCache struct {
	shards [headerShards]headerShard
}

const headerShards = 16

type headerShard struct {
	mu  sync.Mutex
	max int
	lru *list.List
	m   map[erasure.FragmentKey]*list.Element
}

type headerItem struct {
	key erasure.FragmentKey
	h   erasure.Header
}

// newHeaderCache returns a cache of about n headers (at least one a shard).
func newHeaderCache(n int) *headerCache {
	c := &headerCache{}
	for i := range c.shards {
		c.shards[i] = headerShard{max: max(1, n/headerShards), lru: list.New(), m: map[erasure.FragmentKey]*list.Element{}}
	}
	return c
}

// shard returns the shard of key k: the fragments of one stripe spread
// over the shards, as do the stripes of one file.
func (c *headerCache) shard(k erasure.FragmentKey) *headerShard {
	h := k.Ino*0x9e3779b97f4a7c15 ^ k.Stripe*0xbf58476d1ce4e5b9 ^ k.Gen*0x94d049bb133111eb ^ uint64(k.Index)
	return &c.shards[(h^h>>29)%headerShards]
}

func (c *headerCache) get(k erasure.FragmentKey) (erasure.Header, bool) {
	s := c.shard(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.m[k]; ok {
		s.lru.MoveToFront(e)
		return e.Value.(*headerItem).h, true
	}
	return erasure.Header{}, false
}

func (c *headerCache) put(k erasure.FragmentKey, h erasure.Header) {
	s := c.shard(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[k]; ok {
		return
	}
	s.m[k] = s.lru.PushFront(&headerItem{k, h})
	for s.lru.Len() > s.max {
		e := s.lru.Back()
		s.lru.Remove(e)
		delete(s.m, e.Value.(*headerItem).key)
	}
}

// header returns the verified header of fragment i of st on drive id (d),
// from the cache or the drive.
func (c *Client) header(ctx context.Context, d chunkstore.Drive, id placement.DriveID, st *stripeio.Stripe, i int) (erasure.Header, error) {
	key := st.Key(i)
	if h, ok := c.headers.get(key); ok {
		return h, nil
	}
	h, err := stripeio.ReadHeader(ctx, d, id, st, i)
	if err != nil {
		return h, err
	}
	c.headers.put(key, h)
	return h, nil
}
