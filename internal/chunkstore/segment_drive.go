package chunkstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"poolfs/internal/erasure"

	"poolfs/internal/privfile"
)

const (
	// DefaultSegmentSize is the preallocated size of a segment file.
	DefaultSegmentSize = 256 << 20
	// activeSegments is the number of segments taking appends at once, so
	// that concurrent writers do not all queue on one fdatasync.
	activeSegments = 4
	// maxCachedFragment is the largest deferred write that goes through
	// the page cache; larger ones keep O_DIRECT (filling the page cache
	// is slower than the disk for streams).
	maxCachedFragment = 128 << 10
)

// segmentDrive is the segments format (see doc.go): fragments appended to
// a few active segment files, an in-memory index rebuilt by Open.
type segmentDrive struct {
	dir      string
	capacity int64 // 0: from the file system
	segSize  int64
	prealloc bool // fallocate new segments (benchmarks turn it off)
	// fdatasync syncs a segment's records: unix.Fdatasync, replaced in
	// tests to inject failures.
	fdatasync func(fd int) error
	log       *slog.Logger
	bufs      bufPool
	direct    atomic.Bool
	used      atomic.Int64 // bytes of fragments, including reserved writes
	kept      keptExtents  // deleted records' extents kept for reuse (segment_keep.go)
	frags     atomic.Int64
	seq       atomic.Uint64 // last record sequence number
	nextID    atomic.Uint64 // last segment id

	failed sticky
	closed atomic.Bool
	// ops is held shared by every call and exclusively by Close, which
	// closes the segment files: no call uses a closed (or reused) fd.
	ops      sync.RWMutex
	bg       sync.WaitGroup // seals and removals in flight
	keyLocks [256]sync.RWMutex
	slots    [activeSegments]activeSlot
	spare    spareSegments

	mu struct {
		sync.RWMutex
		index map[erasure.FragmentKey]loc
		segs  map[uint64]*segment // open segment files
	}
}

// activeSlot holds one of the drive's active segments.
type activeSlot struct {
	sync.Mutex
	seg *segment // guarded by the slot's mutex
}

// loc is where a live fragment is.
type loc struct {
	seg    *segment
	off    int64 // header block offset
	length int64
	seq    uint64
	mtime  int64
	// cached: written through the page cache in this run, so read back
	// through it too (an O_DIRECT read would write it back first).
	cached bool
}

func (d *segmentDrive) segPath(id uint64) string {
	return d.dir + "/" + segDir + "/" + segName(id)
}

func (d *segmentDrive) fsyncSegDir() error { return privfile.Fsync(d.dir + "/" + segDir) }

func (d *segmentDrive) fallback() {
	if d.direct.Swap(false) {
		d.log.Warn("chunkstore: O_DIRECT not supported, falling back to buffered I/O")
	}
}

// DirectIO reports whether new segment files use O_DIRECT.
func (d *segmentDrive) DirectIO() bool { return d.direct.Load() }

// recordOverhead: each record starts with a header block.
func (d *segmentDrive) recordOverhead() int64 { return Align }

func (d *segmentDrive) keyLock(key erasure.FragmentKey) *sync.RWMutex {
	return &d.keyLocks[(key.Ino^key.Stripe*31^key.Gen*17^uint64(key.Index))%uint64(len(d.keyLocks))]
}

// enter starts a call; unless it fails, the caller must call d.ops.RUnlock.
func (d *segmentDrive) enter(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d.ops.RLock()
	if d.closed.Load() {
		d.ops.RUnlock()
		return fmt.Errorf("%w: closed", ErrFailed)
	}
	return nil
}

// ioError is sysError; a drive whose directory is damaged stays failed.
func (d *segmentDrive) ioError(op string, key erasure.FragmentKey, err error) error {
	if damaged(err) {
		d.failed.set(err)
	}
	return sysError(d.dir, op, key, err)
}

// reserve accounts size bytes before writing, or fails with ErrFull.
func (d *segmentDrive) reserve(size int64) error { return reserve(d.dir, d.capacity, &d.used, size) }

// WriteFragment implements Drive: reserve an extent at the tail of an
// active segment, write header and data in one pwritev (O_DIRECT), then a
// group-committed fdatasync of the segment.
func (d *segmentDrive) WriteFragment(ctx context.Context, key erasure.FragmentKey, frag []byte) error {
	if err := d.enter(ctx); err != nil {
		return opError(d.dir, "write", key, err)
	}
	defer d.ops.RUnlock()
	if err := checkFragLen(len(frag)); err != nil {
		return opError(d.dir, "write", key, err)
	}
	if err := d.failed.err(); err != nil {
		return opError(d.dir, "write", key, err)
	}
	size := int64(len(frag))
	if err := d.reserve(size); err != nil {
		return d.ioError("write", key, err) // statfs of a vanished directory: failed
	}
	deferred := IsDeferred(ctx)
	// A small deferred write goes through the page cache: O_DIRECT would
	// wait for the device, which is what deferring the sync avoids.
	cached := deferred && size <= maxCachedFragment
	r := record{key: key, length: size, mtime: time.Now().UnixNano()}
	s, err := d.place(&r, cached)
	if err != nil {
		d.used.Add(-size)
		return d.ioError("write", key, err)
	}
	r.crc = dataCRC(&s.salt, frag)
	err = d.writeRecord(s, &r, frag, cached)
	if err == nil && !deferred {
		err = s.sync.commit(func() error { return d.fdatasync(s.fd) })
		if err != nil {
			d.failed.set(err)
			err = fmt.Errorf("%w: fdatasync: %w", ErrFailed, err)
		} else if cerr := CheckDir(d.dir); cerr != nil {
			// The segment was synced, but the directory holding it is
			// gone (removed under the server): the record is not durable.
			d.failed.set(cerr)
			err = fmt.Errorf("%w: drive directory is gone: %w", ErrFailed, cerr)
		}
	}
	if err != nil {
		d.used.Add(-size)
		d.punch(s, r.off, Align+size)
		d.release(s)
		return d.ioError("write", key, err)
	}
	if deferred {
		s.deferred.wrote() // durable at the next Sync (or the seal)
	}
	d.insert(s, r, cached)
	d.release(s)
	return nil
}

// Sync implements Drive: one fdatasync of each segment holding deferred
// records no sync covered, segments in parallel (the host file system's
// journal batches them), writers of a segment sharing its syncs.
func (d *segmentDrive) Sync(ctx context.Context) error {
	if err := d.enter(ctx); err != nil {
		return fmt.Errorf("drive %s: sync: %w", d.dir, err)
	}
	defer d.ops.RUnlock()
	if err := d.failed.err(); err != nil {
		return fmt.Errorf("drive %s: sync: %w", d.dir, err)
	}
	d.mu.RLock()
	var todo []*segment
	for _, s := range d.mu.segs {
		if s.deferred.pending() {
			todo = append(todo, s)
		}
	}
	d.mu.RUnlock()
	errs := make([]error, len(todo))
	var wg sync.WaitGroup
	for i, s := range todo {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.deferred.sync(func() error { return d.syncSegment(s) })
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		d.failed.set(err)
		return fmt.Errorf("drive %s: sync: %w: fdatasync: %w", d.dir, ErrFailed, err)
	}
	return nil
}

// syncSegment fdatasyncs s unless it was removed (its records are gone).
func (d *segmentDrive) syncSegment(s *segment) error {
	s.fdMu.RLock()
	defer s.fdMu.RUnlock()
	if s.fdClosed {
		return nil
	}
	return d.fdatasync(s.fd)
}

// slotOf picks the active segment for a fragment: runs of affinityStripes
// consecutive stripes of a file go to the same one, so that a file
// written sequentially lies in long contiguous runs of each drive's
// segments and reads back with large sequential reads; other files and
// runs spread over the slots by hash.
func slotOf(k erasure.FragmentKey) int {
	// splitmix64's finaliser over file and run together, so that two files
	// do not follow the same sequence of slots.
	h := k.Ino*0x9E3779B97F4A7C15 + k.Stripe/affinityStripes
	h = (h ^ h>>30) * 0xBF58476D1CE4E5B9
	h = (h ^ h>>27) * 0x94D049BB133111EB
	h ^= h >> 31
	return int(h % activeSegments)
}

// affinityStripes is the run of a file's stripes that shares a segment.
const affinityStripes = 16

// place reserves room for r in an active segment, creating one if needed,
// and sets r.off, r.seq and r.seg; a write through the page cache (cached)
// takes a kept extent of its size if the drive has one. The caller must
// release the segment.
func (d *segmentDrive) place(r *record, cached bool) (*segment, error) {
	n := Align + r.length
	slot := &d.slots[slotOf(r.key)]
	if cached {
		if s, off, ok := d.takeKept(r.length); ok {
			r.off, r.seg, r.seq = off, s.id, d.seq.Add(1)
			return s, nil
		}
	}
	s, err := d.reserveIn(slot, r, n)
	if err != nil {
		return nil, err
	}
	d.preallocate(s, r.off+n)
	return s, nil
}

// reserveIn reserves n bytes for r in the active segment of slot, or in a
// new one if it is full.
func (d *segmentDrive) reserveIn(slot *activeSlot, r *record, n int64) (*segment, error) {
	slot.Lock()
	defer slot.Unlock()
	if s := slot.seg; s != nil {
		if off, ok := s.reserve(n); ok {
			r.off, r.seg, r.seq = off, s.id, d.seq.Add(1)
			return s, nil
		}
		d.retire(s)
		slot.seg = nil
	}
	size := max(d.segSize, Align+n)
	var s *segment
	if size == d.segSize {
		s = d.spare.take()
	}
	if s == nil {
		var err error
		if s, err = d.createSegment(d.nextID.Add(1), size, d.prealloc); err != nil {
			return nil, err
		}
	}
	d.makeSpares()
	d.mu.Lock()
	d.mu.segs[s.id] = s
	d.mu.Unlock()
	slot.seg = s
	off, _ := s.reserve(n)
	r.off, r.seg, r.seq = off, s.id, d.seq.Add(1)
	return s, nil
}

// writeRecord writes r's header and frag at r.off, through the page cache
// if cached.
func (d *segmentDrive) writeRecord(s *segment, r *record, frag []byte, cached bool) error {
	fd := s.fd
	if cached {
		var err error
		if fd, err = s.buffered(); err != nil {
			return err
		}
	}
	hdr := d.bufs.get(Align)
	defer d.bufs.put(hdr)
	encodeRecordHeader(hdr, &s.salt, r)
	data := frag
	if s.direct && !cached && !isAligned(frag) {
		data = d.bufs.get(len(frag))
		copy(data, frag)
		defer d.bufs.put(data)
	}
	iov := [][]byte{hdr, data}
	off := r.off
	for len(iov) > 0 {
		n, err := unix.Pwritev(fd, iov, off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return errors.New("short write")
		}
		off += int64(n)
		for n > 0 && len(iov) > 0 { // a short write: skip what was written
			k := min(n, len(iov[0]))
			iov[0], n = iov[0][k:], n-k
			if len(iov[0]) == 0 {
				iov = iov[1:]
			}
		}
	}
	return nil
}

// insert makes r the live record of its key (written through the page
// cache if cached); a record it replaces (a retried write) is punched out.
func (d *segmentDrive) insert(s *segment, r record, cached bool) {
	kl := d.keyLock(r.key)
	kl.Lock()
	l := loc{seg: s, off: r.off, length: r.length, seq: r.seq, mtime: r.mtime, cached: cached}
	d.mu.Lock()
	old, had := d.mu.index[r.key]
	if had && old.seq > r.seq { // a concurrent write of the same key won
		d.mu.Unlock()
		kl.Unlock()
		d.used.Add(-r.length)
		s.mu.Lock()
		s.mu.live++ // drop decrements
		s.mu.Unlock()
		d.drop(l)
		return
	}
	d.mu.index[r.key] = l
	d.mu.Unlock()
	s.mu.Lock()
	s.mu.live++
	s.mu.recs = append(s.mu.recs, r)
	s.mu.Unlock()
	kl.Unlock() // the replaced record is punched without it, as in DeleteFragment
	if had {
		d.used.Add(-old.length)
		d.drop(old)
	} else {
		d.frags.Add(1)
	}
}

// drop keeps the extent of a record that left the index for reuse
// (segment_keep.go), or punches it out, header and data in one call (a
// record a crash left punched in part fails Open's checks), and removes
// its segment once that holds no live record. The caller holds the key
// lock.
func (d *segmentDrive) drop(l loc) error {
	var err error
	if !d.keep(l) {
		err = d.punch(l.seg, l.off, Align+l.length)
	}
	s := l.seg
	s.mu.Lock()
	s.mu.live--
	remove := s.mu.live == 0 && s.mu.sealed && !s.mu.removed
	if remove {
		s.mu.removed = true
	}
	s.mu.Unlock()
	if remove {
		d.removeSegment(s)
	}
	return err
}

// punch deallocates [off, off+n) of s; where the file system cannot punch
// holes, it overwrites the first block with zeros, which voids a record
// header just as well.
func (d *segmentDrive) punch(s *segment, off, n int64) error {
	err := unix.Fallocate(s.fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n)
	if errors.Is(err, unix.EOPNOTSUPP) {
		z := d.bufs.get(Align)
		clear(z)
		err = pwriteFull(s.fd, z, off)
		d.bufs.put(z)
	}
	return err
}

func (d *segmentDrive) removeSegment(s *segment) {
	d.mu.Lock()
	delete(d.mu.segs, s.id)
	d.mu.Unlock()
	if err := unix.Unlink(s.path); err != nil {
		d.log.Warn("chunkstore: remove empty segment", "path", s.path, "err", err)
	}
	s.closeFiles()
}

// ReadFragment implements Drive.
func (d *segmentDrive) ReadFragment(ctx context.Context, key erasure.FragmentKey, off, n int64, dst []byte) ([]byte, error) {
	if err := d.enter(ctx); err != nil {
		return nil, opError(d.dir, "read", key, err)
	}
	defer d.ops.RUnlock()
	if err := checkRange(off, n); err != nil {
		return nil, opError(d.dir, "read", key, err)
	}
	kl := d.keyLock(key)
	kl.RLock()
	defer kl.RUnlock()
	d.mu.RLock()
	l, ok := d.mu.index[key]
	d.mu.RUnlock()
	if !ok {
		return nil, opError(d.dir, "read", key, ErrNotFound)
	}
	if n < 0 {
		n = l.length - off
	}
	if n < 0 || off+n > l.length {
		return nil, opError(d.dir, "read", key,
			fmt.Errorf("%w: range [%d, %d) beyond fragment size %d", ErrInvalid, off, off+n, l.length))
	}
	if l.cached {
		out, err := d.readCached(l.seg, l.off+Align+off, n, dst)
		if err != nil {
			return nil, d.ioError("read", key, err)
		}
		return out, nil
	}
	out, err := d.readAt(l.seg, l.off+Align+off, n, dst)
	if err != nil {
		return nil, d.ioError("read", key, err)
	}
	return out, nil
}

// readAt reads n bytes at off of s into dst if it fits (bouncing through
// an aligned buffer when O_DIRECT needs one), else into a new buffer.
func (d *segmentDrive) readAt(s *segment, off, n int64, dst []byte) ([]byte, error) {
	if int64(cap(dst)) >= n && (!s.direct || isAligned(dst)) {
		out := dst[:n]
		return out, preadFull(s.fd, out, off)
	}
	if int64(cap(dst)) < n {
		out := AlignedBuffer(int(n))
		return out, preadFull(s.fd, out, off)
	}
	buf := d.bufs.get(int(n))
	defer d.bufs.put(buf)
	if err := preadFull(s.fd, buf, off); err != nil {
		return nil, err
	}
	return dst[:copy(dst[:n], buf)], nil
}

// readCached reads n bytes at off of s through the page cache, into dst
// if it fits, else into a new buffer.
func (d *segmentDrive) readCached(s *segment, off, n int64, dst []byte) ([]byte, error) {
	fd, err := s.buffered()
	if err != nil {
		return nil, err
	}
	out := dst[:0]
	if int64(cap(dst)) < n {
		out = AlignedBuffer(int(n))
	}
	out = out[:n]
	return out, preadFull(fd, out, off)
}

// DeleteFragment implements Drive: the record leaves the index and is
// punched out, without fsync (a crash may bring it back; GC deletes it
// again).
func (d *segmentDrive) DeleteFragment(ctx context.Context, key erasure.FragmentKey) error {
	if err := d.enter(ctx); err != nil {
		return opError(d.dir, "delete", key, err)
	}
	defer d.ops.RUnlock()
	// The key's lock is held while the index changes, not while the
	// record is punched out (a punch waits on the host file system, tens
	// of milliseconds when it discards the blocks at once): no call finds
	// the record once it has left the index, and the calls on the other
	// keys of the lock's bucket waited behind the punch. A write of the
	// same key meanwhile goes elsewhere with a higher sequence number,
	// which wins at the next open should the punch not happen.
	kl := d.keyLock(key)
	kl.Lock()
	d.mu.Lock()
	l, ok := d.mu.index[key]
	delete(d.mu.index, key)
	d.mu.Unlock()
	kl.Unlock()
	if !ok {
		return nil
	}
	d.used.Add(-l.length)
	d.frags.Add(-1)
	if err := d.drop(l); err != nil {
		return d.ioError("delete", key, err)
	}
	return nil
}

// ListFragments implements Drive, from the in-memory index.
func (d *segmentDrive) ListFragments(ctx context.Context, fn func(key erasure.FragmentKey, size int64, mtime time.Time) error) error {
	type item struct {
		key         erasure.FragmentKey
		size, mtime int64
	}
	d.mu.RLock()
	items := make([]item, 0, len(d.mu.index))
	for k, l := range d.mu.index {
		items = append(items, item{k, l.length, l.mtime})
	}
	d.mu.RUnlock()
	for i, it := range items {
		if i%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if err := fn(it.key, it.size, time.Unix(0, it.mtime)); err != nil {
			return err
		}
	}
	return nil
}

// Stat implements Drive.
func (d *segmentDrive) Stat(ctx context.Context) (Usage, error) {
	if err := ctx.Err(); err != nil {
		return Usage{}, err
	}
	u, err := usage(d.dir, &d.failed, d.capacity, d.used.Load(), d.frags.Load())
	if err != nil {
		return u, err
	}
	u.Kept = d.kept.bytes()
	d.mu.RLock()
	for _, s := range d.mu.segs {
		u.Allocated += s.allocated()
	}
	d.mu.RUnlock()
	d.spare.mu.Lock()
	for _, s := range d.spare.segs {
		u.Allocated += s.allocated()
	}
	d.spare.mu.Unlock()
	return u, nil
}

// retire stops reservations in s; the last writer to release it seals it.
func (d *segmentDrive) retire(s *segment) { d.settle(s, func() { s.mu.retired = true }) }

// release ends a reservation of s.
func (d *segmentDrive) release(s *segment) { d.settle(s, func() { s.mu.inflight-- }) }

// settle applies change to s under its lock, then seals s in the
// background if it is retired with no write in flight; only the first
// caller to see that seals it.
func (d *segmentDrive) settle(s *segment, change func()) {
	s.mu.Lock()
	change()
	seal := s.mu.retired && s.mu.inflight == 0 && !s.mu.sealing
	if seal {
		s.mu.sealing = true
	}
	s.mu.Unlock()
	if seal {
		d.bg.Add(1)
		go d.sealInBackground(s)
	}
}

func (d *segmentDrive) sealInBackground(s *segment) {
	defer d.bg.Done()
	if err := d.seal(s); err != nil {
		d.log.Warn("chunkstore: seal segment (the next open scans it)", "path", s.path, "err", err)
	}
	s.mu.Lock()
	s.mu.sealed = true
	remove := s.mu.live == 0 && !s.mu.removed
	if remove {
		s.mu.removed = true
	}
	s.mu.Unlock()
	if remove {
		d.removeSegment(s)
	}
}

// seal writes the index of s's live records and a trailer at its tail,
// truncates the preallocated rest and fdatasyncs, so that Open reads the
// index instead of scanning. Every record of s is durable already; s takes
// no more records.
func (d *segmentDrive) seal(s *segment) error {
	d.punchKept(s)
	s.mu.Lock()
	end := s.mu.tail
	all := s.mu.recs
	s.mu.recs = nil
	live := s.mu.live
	s.mu.Unlock()
	if live == 0 {
		return nil // removed by the caller
	}
	d.mu.RLock()
	recs := all[:0:0]
	for _, r := range all {
		if l, ok := d.mu.index[r.key]; ok && l.seg == s && l.off == r.off {
			recs = append(recs, r)
		}
	}
	d.mu.RUnlock()
	b := encodeIndex(recs, &s.salt, s.id, end)
	if err := unix.Ftruncate(s.fd, end+int64(len(b))); err != nil {
		return err
	}
	if err := pwriteFull(s.fd, b, end); err != nil {
		return err
	}
	return unix.Fdatasync(s.fd)
}

// Close seals the active segments, waits for seals in flight and closes
// the segment files. Calls after Close fail with ErrFailed.
func (d *segmentDrive) Close() error {
	d.ops.Lock() // waits for calls in flight
	defer d.ops.Unlock()
	if d.closed.Swap(true) {
		return nil
	}
	for i := range d.slots {
		slot := &d.slots[i]
		slot.Lock()
		if slot.seg != nil {
			d.retire(slot.seg)
			slot.seg = nil
		}
		slot.Unlock()
	}
	d.bg.Wait()
	for s := d.spare.take(); s != nil; s = d.spare.take() {
		d.removeSegment(s) // empty: an open would remove it anyway
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, s := range d.mu.segs {
		s.closeFiles()
	}
	d.mu.segs = nil
	return nil
}
