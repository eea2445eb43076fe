package client

import (
	"sync"

	"golang.org/x/sys/unix"

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
// once (File.forgetLogsLocked). The folds for the delta budget take the
// stripes of the oldest log stripes first, so a cache as large as the
// log serves them all, and a smaller one the newest part of the log.
//
// A log stripe's bytes never change: its number is new when it is
// written, and it is never rewritten, only dropped. An entry holds the
// log stripe's generation too, and is used only for a record of that
// generation, so it never stands for other bytes. The buffers of entries
// that leave are used again for new ones (a fresh 8 MiB buffer a log
// stripe costs page faults worth more than the copy), so the bytes are
// copied out under the cache's lock (read), never handed out.
// DefaultLogCache returns Options.LogCache's default: an eighth of the
// machine's memory (a file's delta log is at most about half its size,
// so this serves every fold of a file up to twice that size; Lustre's
// client, for comparison, caches up to half of memory by default), or
// 1 GiB where the memory size is unknown. Memory is taken only as log
// stripes are written, and given back as the folds empty them.
func DefaultLogCache() int64 {
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) != nil || si.Totalram == 0 {
		return 1 << 30
	}
	return int64(si.Totalram) * int64(max(si.Unit, 1)) / 8
}

type logCache struct {
	max int64

	mu    sync.RWMutex
	n     int64
	ents  map[logKey]logEntry
	order []logKey // insertion order; order[head:] are in ents or gone
	head  int
	free  [][]byte // buffers of entries that left, to fill again
}

type logKey struct {
	ino    meta.Ino
	stripe uint64
}

type logEntry struct {
	gen uint64
	b   []byte
}

// maxFreeLogBufs bounds the buffers a logCache keeps to fill again.
const maxFreeLogBufs = 4

func newLogCache(max int64) *logCache {
	return &logCache{max: max, ents: map[logKey]logEntry{}}
}

// buffer returns a buffer of n bytes to fill and put, or nil when the
// cache does not take n bytes.
func (lc *logCache) buffer(n int) []byte {
	if lc == nil || int64(n) > lc.max {
		return nil
	}
	lc.mu.Lock()
	defer lc.mu.Unlock()
	for i := len(lc.free) - 1; i >= 0; i-- {
		if b := lc.free[i]; cap(b) >= n {
			lc.free = append(lc.free[:i], lc.free[i+1:]...)
			return b[:n]
		}
	}
	return make([]byte, n)
}

// put keeps b (from buffer), the bytes of log stripe rec of file ino,
// dropping the oldest entries beyond the bound. b must not be used
// afterwards.
func (lc *logCache) put(ino meta.Ino, rec meta.StripeRec, b []byte) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	k := logKey{ino, rec.Stripe}
	if _, ok := lc.ents[k]; ok {
		lc.recycleLocked(b)
		return
	}
	lc.ents[k] = logEntry{rec.Gen, b}
	lc.order = append(lc.order, k)
	lc.n += int64(len(b))
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

// read copies bytes [from, from+len(dst)) of log stripe rec of file ino
// into dst and reports whether the cache held them.
func (lc *logCache) read(ino meta.Ino, rec meta.StripeRec, from int, dst []byte) bool {
	if lc == nil {
		return false
	}
	lc.mu.RLock()
	defer lc.mu.RUnlock()
	e, ok := lc.ents[logKey{ino, rec.Stripe}]
	if !ok || e.gen != rec.Gen || from < 0 || from+len(dst) > len(e.b) {
		return false
	}
	copy(dst, e.b[from:])
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
		lc.n -= int64(len(e.b))
		lc.recycleLocked(e.b)
	}
}

func (lc *logCache) recycleLocked(b []byte) {
	if len(lc.free) < maxFreeLogBufs {
		lc.free = append(lc.free, b[:cap(b)])
	}
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
