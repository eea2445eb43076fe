package client

import "sync/atomic"

// Sequential streams of one File.
//
// A File is shared by every reader of its inode (the mount keeps one File
// per open inode), so several sequential readers of one file (IOR's N-to-1
// read, data loaders reading one shard each from a shared file, two dd
// of the two halves) interleave their requests on one File. As ZFS's
// dmu_zfetch does, the File keeps several streams, each with where it
// expects its next read, how many reads in a row continued it and its own
// read-ahead window, and a read continues the stream whose expected
// position it is nearest; a read that continues none starts a new stream
// in place of the least recently used one. With one stream per File, two
// interleaved readers reset each other at every request and were served a
// shard range at a time, without whole stripes or readahead.
//
// A stream also remembers where it started. Another stream's read-ahead
// stops there (readStreams.limit): in IOR's segmented layout, or data
// loaders reading one shard each, that is where the next reader's part
// begins, and the next reader has read (or reads ahead) that part itself,
// as each reader of a file of its own stops at its file's end. Reading on
// into it fetched, at the end of every part, up to a window of stripes
// the next reader had already read and the cache had let go.

// maxStreams is how many sequential streams a File tracks at once.
const maxStreams = 16

// seqWindow is how far from where a stream's reads ended a read still
// counts as part of the established stream. The kernel keeps its
// readahead window (16 MiB as the mount sets it; read_ahead_kb of the
// mount's bdi) in flight as parallel READs that arrive in any order. With
// only the two-stripe test such a stream was taken for random reads,
// served a shard range at a time without readahead
// (TestOutOfOrderSequentialReads: 201 range reads of 256 sequential ones
// arriving out of order within 8 stripes).
const seqWindow = 64 << 20

// readStream is one sequential reader of a File as the File sees it.
type readStream struct {
	start int64  // offset of the read that started it (the lowest, once merged)
	next  int64  // offset after the furthest read that continued it
	seqs  int    // reads in a row that continued it (near next)
	used  uint64 // readStreams.tick at its last read (least recently used is replaced)
	// wide says it started within the window of an established stream:
	// it reaches as far as an established one (continued).
	wide bool
	// waiting is how many of its reads wait for a stripe being filled
	// (refill.go); changed without the File's mutex.
	waiting atomic.Int32
}

// established reports whether the stream has been continued often enough
// to read whole stripes and ahead for it.
func (st *readStream) established() bool { return st.seqs >= 2 }

// readStreams are the sequential streams of a File, guarded by its mutex.
type readStreams struct {
	list   []*readStream
	tick   uint64
	window int64 // seqWindow; tests set a smaller one
}

// match files a read of bytes [off, end) under a stream and returns the
// stream that decides how it is read, and whether the read is sequential
// (it gets whole stripes and readahead once that stream is established).
//
// A read continues the nearest stream within reach (continued): two
// stripes either way of where an established stream expects its next
// read, twice the read's length of where a new one does. Streams that end
// up within two stripes of each other are one stream (the readers of a
// strided layout, or the out-of-order requests of one kernel readahead
// window) and are merged. A read that continues no stream but lies within
// the window of an established one is read as part of it (the kernel's
// readahead requests arrive in any order within its window; the readers
// of a strided layout lag behind each other), without moving it. Either
// way it also starts a new stream (perhaps another reader), replacing the
// least recently used.
func (rs *readStreams) match(off, end, sb int64) (st *readStream, sequential bool) {
	rs.tick++
	near := 2 * sb
	if st := rs.continued(off, end-off, near); st != nil {
		st.seqs++
		st.next = max(st.next, end)
		st.used = rs.tick
		rs.merge(st, near)
		return st, true
	}
	via := rs.nearest(off, max(near, rs.window), true)
	if via == nil {
		return rs.add(off, end), false
	}
	via.used = rs.tick
	rs.add(off, end).wide = true // perhaps another reader, lagging or ahead
	return via, true
}

// continued returns the stream a read of n bytes at off continues, or
// nil: of the streams whose next is within reach of off, the nearest. An
// established stream, and one started within the window of an
// established stream (where reads are taken as sequential anyway), reach
// near bytes either way (the kernel's readahead requests arrive in any
// order; the readers of a strided file lag behind each other); another
// stream only 2n, so that random reads, which land anywhere, seldom
// continue one of up to maxStreams earlier reads and pass for a stream (a
// sequential reader's next request starts where its last ended, give or
// take the requests in flight beside it).
func (rs *readStreams) continued(off, n, near int64) *readStream {
	var best *readStream
	bestDist := int64(-1)
	for _, st := range rs.list {
		dist := off - st.next
		if dist < 0 {
			dist = -dist
		}
		reach := 2 * n
		if st.established() || st.wide {
			reach = near
		}
		if dist <= reach && (best == nil || dist < bestDist) {
			best, bestDist = st, dist
		}
	}
	return best
}

// nearest returns the stream whose next is closest to off and at most d
// away (only established ones, if est), or nil.
func (rs *readStreams) nearest(off, d int64, est bool) *readStream {
	var best *readStream
	bestDist := d + 1
	for _, st := range rs.list {
		dist := off - st.next
		if dist < 0 {
			dist = -dist
		}
		if dist < bestDist && (!est || st.established()) {
			best, bestDist = st, dist
		}
	}
	return best
}

// merge folds the other streams within d of st into it.
func (rs *readStreams) merge(st *readStream, d int64) {
	keep := rs.list[:0]
	for _, o := range rs.list {
		if o != st && o.next >= st.next-d && o.next <= st.next+d {
			st.seqs = max(st.seqs, o.seqs)
			st.next = max(st.next, o.next)
			st.start = min(st.start, o.start)
			continue
		}
		keep = append(keep, o)
	}
	clear(rs.list[len(keep):])
	rs.list = keep
}

// add starts a stream at a read of bytes [start, next), in place of the
// least recently used stream if there are maxStreams.
func (rs *readStreams) add(start, next int64) *readStream {
	st := &readStream{start: start, next: next, used: rs.tick}
	if len(rs.list) < maxStreams {
		rs.list = append(rs.list, st)
		return st
	}
	lru := 0
	for i, o := range rs.list {
		if o.used < rs.list[lru].used {
			lru = i
		}
	}
	rs.list[lru] = st
	return st
}

// limit is where read-ahead for stream st, which has read up to end,
// stops: the start of the nearest established stream other than st that
// started beyond end (another reader's part), or -1 if there is none.
func (rs *readStreams) limit(st *readStream, end int64) int64 {
	lim := int64(-1)
	for _, o := range rs.list {
		if o != st && o.established() && o.start >= end && (lim < 0 || o.start < lim) {
			lim = o.start
		}
	}
	return lim
}

// busy lists the stripes (of sb bytes) the streams read next: the
// cache keeps them longest.
func (rs *readStreams) busy(sb int64) []uint64 {
	out := make([]uint64, 0, len(rs.list))
	for _, st := range rs.list {
		out = append(out, uint64(st.next/sb))
	}
	return out
}

// staleReads is how many reads of a File may pass without one of a
// stream before the stream no longer counts as active: it keeps its place
// in the list (a reader that comes back continues it), but the cache no
// longer holds a window for it.
const staleReads = 256

// active is how many established streams read within the last
// staleReads reads of the File (at least 1): the File's stripe cache
// holds a read-ahead window for each.
func (rs *readStreams) active() int {
	n := 0
	for _, st := range rs.list {
		if rs.isActive(st) {
			n++
		}
	}
	return max(n, 1)
}

// isActive reports whether st is established and read within the last
// staleReads reads of the File.
func (rs *readStreams) isActive(st *readStream) bool {
	return st.established() && rs.tick-st.used < staleReads
}

// aheadLocked is how many stripes stream st reads ahead: 4 once it is
// established, doubling with each read that continues it, up to
// Options.ReadAhead.
func (f *File) aheadLocked(st *readStream) int {
	return min(f.c.opts.ReadAhead, 1<<min(max(st.seqs, 2), 20))
}

// cacheSizeLocked is how many stripes f's cache holds: a read-ahead
// window for each established stream, up to the client's read-ahead
// budget (Options.ReadAheadTotal), plus StripesInFlight.
func (f *File) cacheSizeLocked() int {
	o := f.c.opts
	return min(f.mu.streams.active()*o.ReadAhead, max(o.ReadAheadTotal, o.ReadAhead)) + o.StripesInFlight
}
