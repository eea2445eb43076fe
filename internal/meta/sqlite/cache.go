package sqlite

import (
	"sync"
)

// defaultCacheEntries bounds the read cache (Options.CacheEntries): about
// 150 bytes each for an inode or a directory entry, so some 20 MiB.
const defaultCacheEntries = 1 << 17

// cache holds the committed values of recently used keys, so that most
// Gets run no SQLite statement (a read transaction costs a begin, a
// statement and a rollback, tens of microseconds; a map lookup well under
// one).
//
// It is correct because this engine is the database's only writer: Open
// takes an exclusive lock on the file, and every write goes through the
// committer goroutine, which applies a batch's writes to the cache after
// the batch committed and before any of its Updates returns. So the cache
// never holds a value older than the newest one an Update has returned.
// Absent keys are cached too (a nil value).
//
// Generations make reads consistent without holding a lock while a View
// runs. gen is even while no commit is in flight: the committer makes it
// odd before COMMIT (begin) and even again when it applies the batch's
// writes (apply), stamping each written entry with the new generation.
// An entry stamped s holds the committed value of its key from
// generation s until the entry changes, so a View that started at
// generation g may use every entry stamped at most g: together they are
// the committed state at g.
//
// A reader that had to go to SQLite fills the cache with what its
// snapshot read, only if the generation was even before the snapshot
// began and has not changed since: then the snapshot is the state at that
// generation, and the entries are stamped with it. Entries already cached
// are left alone (they hold the same value, with an older stamp).
type cache struct {
	max int
	mu  struct {
		sync.RWMutex
		gen uint64           // guarded by mu
		m   map[string]entry // guarded by mu
	}
}

type entry struct {
	v   []byte // nil: the key is absent
	gen uint64 // generation since which v is the committed value
}

func newCache(max int) *cache {
	c := &cache{max: max}
	c.mu.m = make(map[string]entry, 1024)
	return c
}

// writeSet maps keys to values: Puts (v not nil) and Deletes (v nil) not
// yet applied, or values read (nil: absent).
type writeSet map[string][]byte

// generation returns the current generation.
func (c *cache) generation() uint64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.mu.gen
}

// get returns a copy of the cached value of k (nil: absent) for the
// committer, which sees the newest committed state; hit is false if the
// cache does not know k.
func (c *cache) get(k []byte) (v []byte, hit bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	en, hit := c.mu.m[string(k)]
	if hit && en.v != nil {
		return append([]byte{}, en.v...), true
	}
	return nil, hit
}

// getAt is get for a reader at generation g: only entries stamped at most
// g are hits.
func (c *cache) getAt(k []byte, g uint64) (v []byte, hit bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	en, hit := c.mu.m[string(k)]
	if !hit || en.gen > g {
		return nil, false
	}
	if en.v != nil {
		return append([]byte{}, en.v...), true
	}
	return nil, true
}

// fill caches values read from a snapshot that began after generation()
// returned gen, if gen is even and still current.
func (c *cache) fill(gen uint64, kvs writeSet) {
	if len(kvs) == 0 || gen%2 != 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.gen != gen {
		return
	}
	for k, v := range kvs {
		if _, ok := c.mu.m[k]; !ok {
			c.mu.m[k] = entry{v: v, gen: gen}
		}
	}
	c.evictLocked()
}

// begin marks a commit in flight (gen odd); apply or reset ends it.
func (c *cache) begin() {
	c.mu.Lock()
	c.mu.gen++
	c.mu.Unlock()
}

// apply stores the writes of the batch that committed since begin.
func (c *cache) apply(w writeSet) { c.store(w, 1) }

// applyNow stores the writes of an update acknowledged in a lingering
// transaction (linger.go): they are the newest state, committed or not.
// The generation moves by two, so it stays even: there is no commit in
// flight to mark, since the cache is ahead of SQLite, not behind it.
func (c *cache) applyNow(w writeSet) {
	if len(w) > 0 {
		c.store(w, 2)
	}
}

// store moves the generation by step and stamps the writes w with it.
func (c *cache) store(w writeSet, step uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.gen += step
	for k, v := range w {
		c.mu.m[k] = entry{v: v, gen: c.mu.gen}
	}
	c.evictLocked()
}

// reset forgets everything (after a commit whose outcome is unknown).
func (c *cache) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.gen++
	clear(c.mu.m)
}

// evictLocked drops entries, in the map's random order, down to three
// quarters of max once max is exceeded. mu is held for writing.
func (c *cache) evictLocked() {
	if len(c.mu.m) <= c.max {
		return
	}
	for k := range c.mu.m {
		if len(c.mu.m) <= c.max*3/4 {
			return
		}
		delete(c.mu.m, k)
	}
}
