package chunkstore

import "sync"

// Kept extents: reusing the space of deleted small records.
//
// A record written through the page cache (a small deferred write, such
// as a small file's mirror copy) that is deleted while its segment is
// still active is not punched out: its header block is overwritten with
// zeros, and its extent (header block and data) is kept for the next
// cached write of the same length to that segment, up to keptBudget bytes
// per drive. That write then goes into blocks the host file system has
// allocated and pages it still caches, instead of new blocks and new
// pages at the segment's tail, and the delete costs one cached block write
// instead of two hole punches. Files that come and go (build trees, temp
// files, rotated checkpoints, a benchmark's create and remove phases) keep
// reusing the same few megabytes.
//
// What it costs is space: a kept extent still takes its blocks on the
// host. Usage.Kept reports those bytes (they are part of Allocated), never
// more than keptBudget per drive; the seal of a segment punches the
// extents it keeps, so a sealed segment never holds one.
//
// Crash safety: the zeroed header is written before the extent is offered
// for reuse, and a record header that does not check is skipped by the
// scan of an unsealed segment (scanSegment), exactly like a torn write. A
// crash before the zeroed block reaches the disk brings the deleted
// record back, whole, as a crash after a punch without fsync does (garbage
// collection deletes it again). A reuse writes a new header (new sequence
// number, new data CRC) and the data in one pwritev: torn, its data does
// not match its header's CRC and the record is not visible.

// keptBudget bounds the bytes of kept extents per drive.
const keptBudget = 16 << 20

// keptExtents are a drive's kept extents, by data length. Lock order:
// keptExtents.mu, then a segment's mu.
type keptExtents struct {
	mu    sync.Mutex
	off   bool  // keep nothing (benchmarks compare)
	n     int64 // bytes (header blocks and data)
	byLen map[int64][]keptExtent
}

// keptExtent is a kept record extent: header block at off of s.
type keptExtent struct {
	s   *segment
	off int64
}

func (k *keptExtents) bytes() int64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.n
}

// keep keeps the extent of l, a record that left the index, for reuse; it
// reports false (the caller punches the record out) when l was not written
// through the page cache in this run, its segment no longer takes records,
// or the drive's budget is spent.
func (d *segmentDrive) keep(l loc) bool {
	n := Align + l.length
	if !l.cached || l.length > maxCachedFragment {
		return false
	}
	k := &d.kept
	k.mu.Lock()
	if k.off || k.n+n > keptBudget || l.seg.isRetired() {
		k.mu.Unlock()
		return false
	}
	k.n += n // held for l while its header is voided
	k.mu.Unlock()
	// The header is voided before the extent can be reused: a crash from
	// here on scans it as a torn record.
	err := d.voidHeader(l.seg, l.off)
	k.mu.Lock()
	defer k.mu.Unlock()
	if err != nil || l.seg.isRetired() { // the seal may have taken the list already
		k.n -= n
		return false
	}
	if k.byLen == nil {
		k.byLen = map[int64][]keptExtent{}
	}
	k.byLen[l.length] = append(k.byLen[l.length], keptExtent{l.seg, l.off})
	return true
}

// takeKept reserves a kept extent for length data bytes in a segment that
// still takes records, as segment.reserve does at the tail: the caller
// releases the segment. The extents of a retired segment stay listed for
// its seal to punch (punchKept).
func (d *segmentDrive) takeKept(length int64) (*segment, int64, bool) {
	k := &d.kept
	k.mu.Lock()
	defer k.mu.Unlock()
	exts := k.byLen[length]
	for i := len(exts) - 1; i >= 0; i-- {
		e := exts[i]
		e.s.mu.Lock()
		ok := !e.s.mu.retired
		if ok {
			e.s.mu.inflight++
		}
		e.s.mu.Unlock()
		if ok {
			k.byLen[length] = append(exts[:i], exts[i+1:]...)
			k.n -= Align + length
			return e.s, e.off, true
		}
	}
	return nil, 0, false
}

// isRetired reports whether s takes no more records.
func (s *segment) isRetired() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.retired
}

// voidHeader overwrites the header block at off with zeros, through the
// page cache (the record was written through it).
func (d *segmentDrive) voidHeader(s *segment, off int64) error {
	fd, err := s.buffered()
	if err != nil {
		return err
	}
	z := d.bufs.get(Align)
	clear(z)
	err = pwriteFull(fd, z, off)
	d.bufs.put(z)
	return err
}

// punchKept punches out the extents s keeps, before its seal: s is
// retired, so it keeps no more.
func (d *segmentDrive) punchKept(s *segment) {
	k := &d.kept
	var mine []keptExtent
	var lens []int64
	k.mu.Lock()
	for length, exts := range k.byLen {
		rest := exts[:0]
		for _, e := range exts {
			if e.s == s {
				mine = append(mine, e)
				lens = append(lens, length)
				k.n -= Align + length
			} else {
				rest = append(rest, e)
			}
		}
		k.byLen[length] = rest
	}
	k.mu.Unlock()
	for i, e := range mine {
		if err := d.punch(s, e.off, Align+lens[i]); err != nil {
			d.log.Warn("chunkstore: punch kept extent", "path", s.path, "off", e.off, "err", err)
		}
	}
}
