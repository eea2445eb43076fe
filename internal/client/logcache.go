package client

import (
	"sync"

	"poolfs/internal/erasure"
	"poolfs/internal/meta"
)

// The log cache: the bytes of the log stripes this client wrote, kept in
// memory so that the folds (and reads) of their extents do not read them
// back from the drives.
//
// A fold reads the stripe's generation and the parts of its extents from
// their log stripes. Under random writes all over a file, the extents'
// parts were about half of what the folds read from the drives (random
// 4 KiB and 64 KiB writes, bench/randwrite.sh), and on drives that share
// one disk, reading them back takes disk time from the writes of the log
// and of the folds. The client that wrote a log stripe had its bytes;
// the cache keeps a copy, newest in, oldest out, up to Options.LogCache
// bytes per client, and a log stripe that the folds emptied leaves it at
// once (foldState.gone). The folds for the delta budget take the
// stripes of the oldest log stripes first, so a cache as large as the
// log serves them all, and a smaller one the newest part of the log.
//
// A log stripe's bytes never change: its number is new when it is
// written, and it is never rewritten, only dropped. An entry holds the
// log stripe's generation too, and is used only for a record of that
// generation, so it never stands for other bytes.
//
// A full log stripe's data shards are not copied: the cache takes the
// fragment buffers they are in from the stripe buffer that was written,
// and gives it others (swap). A short one is copied (writeStripe lays
// its shards out anew). The buffers of entries that leave are used again
// (fresh memory for each log stripe cost page faults worth more than a
// copy), so bytes are copied out under the cache's lock (read), never
// handed out.

// DefaultLogCache returns Options.LogCache's default: an eighth of the
// memory the process may use (processMemory), or 1 GiB where that is
// unknown. A file's delta log is at most about half its size, so this
// serves every fold of a file up to twice that size; Lustre's client, for
// comparison, caches up to half of memory by default. Memory is taken
// only as log stripes are written, and given back as the folds empty
// them.
func DefaultLogCache() int64 {
	if mem := processMemory(); mem > 0 {
		return mem / 8
	}
	return 1 << 30
}

type logCache struct {
	max int64

	mu    sync.RWMutex
	n     int64
	ents  map[logKey]*logEntry
	order []logKey // insertion order; order[head:] are in ents or gone
	head  int
	free  map[int][][]byte // fragment buffers of entries that left, by size
	nfree int
}

type logKey struct {
	ino    meta.Ino
	stripe uint64
}

// logEntry is a log stripe's bytes in the full-unit layout of its file:
// byte i in shards[i/unit] at i%unit. The shards lie in the fragment
// buffers bufs, which the entry owns.
type logEntry struct {
	gen    uint64
	n      int
	unit   int
	shards [][]byte
	bufs   [][]byte
}

func (e *logEntry) size() int64 {
	var n int64
	for _, b := range e.bufs {
		n += int64(len(b))
	}
	return n
}

// maxFreeLogBufs bounds the fragment buffers a logCache keeps to fill
// again.
const maxFreeLogBufs = 64

func newLogCache(max int64) *logCache {
	return &logCache{max: max, ents: map[logKey]*logEntry{}, free: map[int][][]byte{}}
}

// takes reports whether the cache takes a log stripe of n bytes.
func (lc *logCache) takes(n int) bool { return lc != nil && int64(n) <= lc.max }

// swap keeps the data shards of b, a full log stripe of unit-byte
// shards that writeStripe wrote as stripe rec of file ino, by taking
// b's first k fragment buffers and putting others of the same size in
// their place: the bytes are not copied. b's buffers are not written
// after writeStripe returns (the pool it comes from reuses it then).
// Nothing happens if the cache does not take n bytes.
func (lc *logCache) swap(ino meta.Ino, rec meta.StripeRec, b *stripeBuf, k, unit, n int) {
	if !lc.takes(n) {
		return
	}
	e := &logEntry{gen: rec.Gen, n: n, unit: unit}
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if _, ok := lc.ents[logKey{ino, rec.Stripe}]; ok {
		return
	}
	for i := range k {
		e.shards = append(e.shards, b.shard(i, unit))
		e.bufs = append(e.bufs, b.frags[i])
		b.frags[i] = lc.bufferLocked(len(b.frags[i]))
	}
	lc.putLocked(ino, rec.Stripe, e)
}

// copyOf copies the first n bytes of the full-unit data shards of b
// (unit bytes each) into an entry for put: for a log stripe whose shards
// writeStripe lays out anew (a short or mirrored one). nil: the cache
// does not take n bytes.
func (lc *logCache) copyOf(b *stripeBuf, unit, n int) *logEntry {
	if !lc.takes(n) {
		return nil
	}
	e := &logEntry{n: n, unit: unit}
	size := len(b.frags[0])
	lc.mu.Lock()
	for at := 0; at < n; at += unit {
		e.bufs = append(e.bufs, lc.bufferLocked(size))
	}
	lc.mu.Unlock()
	h := erasure.HeaderSize(unit)
	for i, buf := range e.bufs {
		sh := buf[h : h+unit]
		copy(sh[:min(unit, n-i*unit)], b.shard(i, unit))
		e.shards = append(e.shards, sh)
	}
	return e
}

// put keeps e (from copyOf) as log stripe rec of file ino.
func (lc *logCache) put(ino meta.Ino, rec meta.StripeRec, e *logEntry) {
	e.gen = rec.Gen
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if _, ok := lc.ents[logKey{ino, rec.Stripe}]; ok {
		lc.recycleLocked(e)
		return
	}
	lc.putLocked(ino, rec.Stripe, e)
}

// release gives back the buffers of e (from copyOf; nil: none), not kept.
func (lc *logCache) release(e *logEntry) {
	if e == nil {
		return
	}
	lc.mu.Lock()
	defer lc.mu.Unlock()
	lc.recycleLocked(e)
}

// putLocked adds e and drops the oldest entries beyond the bound.
func (lc *logCache) putLocked(ino meta.Ino, stripe uint64, e *logEntry) {
	k := logKey{ino, stripe}
	lc.ents[k] = e
	lc.order = append(lc.order, k)
	lc.n += e.size()
	for lc.n > lc.max && lc.head < len(lc.order) {
		old := lc.order[lc.head]
		lc.order[lc.head] = logKey{}
		lc.head++
		lc.dropLocked(old)
	}
	if lc.head > len(lc.order)/2 { // compact the queue now and then
		lc.order = append(lc.order[:0], lc.order[lc.head:]...)
		lc.head = 0
	}
}

// bufferLocked returns a fragment buffer of size bytes, one of a
// dropped entry if the cache has one.
func (lc *logCache) bufferLocked(size int) []byte {
	if l := lc.free[size]; len(l) > 0 {
		b := l[len(l)-1]
		lc.free[size] = l[:len(l)-1]
		lc.nfree--
		return b
	}
	return erasure.AlignedBuffer(size)
}

// read copies bytes [from, from+len(dst)) of log stripe rec of file ino
// into dst and reports whether the cache held them.
func (lc *logCache) read(ino meta.Ino, rec meta.StripeRec, from int, dst []byte) bool {
	if lc == nil {
		return false
	}
	lc.mu.RLock()
	defer lc.mu.RUnlock()
	e, ok := lc.ents[logKey{ino, rec.Stripe}]
	if !ok || e.gen != rec.Gen || from < 0 || from+len(dst) > e.n {
		return false
	}
	for at := from; len(dst) > 0; {
		c := copy(dst, e.shards[at/e.unit][at%e.unit:])
		dst, at = dst[c:], at+c
	}
	return true
}

// drop forgets log stripe log of file ino (the folds emptied it).
func (lc *logCache) drop(ino meta.Ino, log uint64) {
	if lc == nil {
		return
	}
	lc.mu.Lock()
	defer lc.mu.Unlock()
	lc.dropLocked(logKey{ino, log})
}

func (lc *logCache) dropLocked(k logKey) {
	if e, ok := lc.ents[k]; ok {
		delete(lc.ents, k)
		lc.n -= e.size()
		lc.recycleLocked(e)
	}
}

// recycleLocked keeps e's buffers to fill again, up to maxFreeLogBufs.
func (lc *logCache) recycleLocked(e *logEntry) {
	for _, b := range e.bufs {
		if lc.nfree < maxFreeLogBufs {
			lc.free[len(b)] = append(lc.free[len(b)], b)
			lc.nfree++
		}
	}
	e.bufs, e.shards = nil, nil
}

// size returns the bytes the cache holds.
func (lc *logCache) size() int64 {
	if lc == nil {
		return 0
	}
	lc.mu.RLock()
	defer lc.mu.RUnlock()
	return lc.n
}
