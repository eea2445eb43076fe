package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"poolfs/internal/clustermap"
	"poolfs/internal/meta"
	"poolfs/internal/placement"
	"poolfs/internal/stripeio"
)

// ReadAt reads len(p) bytes at off. At the end of the file it returns the
// bytes there are and io.EOF. The handle's own unflushed writes are seen.
//
// Reads of one handle run in parallel: the mutex is held to plan a read
// (records, cache entries, readahead), not while waiting for fragments or
// copying bytes. That never returns bytes older than a write of this
// handle that finished before the read started: such a write is, when the
// read is planned, either unflushed (then the read is done with the mutex
// held, laying the unflushed bytes over the committed ones) or committed
// (and its stripe's record and cache entry were replaced at the commit).
func (f *File) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("%w: negative offset", meta.ErrInvalid)
	}
	f.mu.Lock()
	return f.readUnlock(ctx, p, off, false)
}

// TryReadAt is ReadAt that never waits: unless the mutex is free and every
// byte asked for is at hand (in stripes the cache holds filled, in holes,
// or beyond the end), with the records of the stripes the read would read
// ahead known, it returns ErrWouldBlock at once, having changed nothing.
// A read it does serve counts towards sequential detection and starts
// readahead as ReadAt does (readahead runs in the background).
func (f *File) TryReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("%w: negative offset", meta.ErrInvalid)
	}
	if !f.mu.TryLock() {
		return 0, ErrWouldBlock
	}
	if !f.readyLocked(len(p), off) {
		f.mu.Unlock()
		return 0, ErrWouldBlock
	}
	return f.readUnlock(ctx, p, off, true)
}

// readyLocked reports whether a read of n bytes at off finds everything
// at hand (see TryReadAt).
func (f *File) readyLocked(n int, off int64) bool {
	if off >= f.mu.size || n == 0 {
		return true
	}
	n = int(min(int64(n), f.mu.size-off))
	sb := f.stripeBytes()
	first, last := uint64(off/sb), uint64((off+int64(n)-1)/sb)
	for s := first; s <= last; s++ {
		if f.pendingLocked(s) {
			return false
		}
		rec, ok := f.mu.recs[s]
		if !ok {
			return false
		}
		if rec.Gen != 0 && !f.mu.cache.filled(s, rec.Gen) {
			return false
		}
	}
	end := uint64((f.mu.size - 1) / sb)
	for s := last + 1; s <= last+uint64(f.c.opts.ReadAhead) && s <= end; s++ {
		if _, ok := f.mu.recs[s]; !ok && !f.heldLocked(s) {
			return false // readahead would ask the metadata service
		}
	}
	return true
}

// readUnlock is ReadAt from the point where f.mu is held; it releases it.
// With ready (readyLocked held), nothing waits. A read that met a stripe
// replaced since the handle took its record (errStale: a fold or another
// writer committed it, and the old generation was collected) drops the
// records of its range and reads again.
func (f *File) readUnlock(ctx context.Context, p []byte, off int64, ready bool) (int, error) {
	return retryStale(func() (int, error) { return f.readUnlockOnce(ctx, p, off, ready) }, func() {
		f.mu.Lock()
		f.dropRecordsLocked(off, len(p))
		ready = false
	})
}

// staleRetries bounds how often a read starts again over records found
// stale: each time, a writer replaced a stripe of the range between the
// read's fetch of its record and of its fragments, and the collector was
// quicker still.
const staleRetries = 8

// retryStale runs read until it returns anything but errStale, at most
// staleRetries times more, and calls again (which drops the records found
// stale) before each new attempt.
func retryStale(read func() (int, error), again func()) (int, error) {
	for attempt := 0; ; attempt++ {
		n, err := read()
		if !errors.Is(err, errStale) || attempt >= staleRetries {
			return n, err
		}
		again()
	}
}

// dropRecordsLocked forgets the records of the stripes of n bytes at off,
// so that the next read fetches them (with their extents) again.
func (f *File) dropRecordsLocked(off int64, n int) {
	sb := f.stripeBytes()
	for s := uint64(off / sb); s <= uint64((off+int64(max(n, 1))-1)/sb); s++ {
		delete(f.mu.recs, s)
	}
}

// readUnlockOnce is one attempt of readUnlock.
func (f *File) readUnlockOnce(ctx context.Context, p []byte, off int64, ready bool) (int, error) {
	pl, err := f.planLocked(ctx, p, off)
	if err != nil || pl.n == 0 {
		f.mu.Unlock()
		return 0, err
	}
	if pl.locked {
		defer f.mu.Unlock()
		return f.readLocked(ctx, p, off)
	}
	f.mu.Unlock()
	err = f.readPlan(ctx, pl, p, off)
	if !ready { // a ready read's entries were filled without error
		f.dropFailed(pl)
	}
	pl.release()
	if err != nil {
		return 0, err
	}
	if pl.n < len(p) {
		return pl.n, io.EOF
	}
	return pl.n, nil
}

// readPlan is a read decided under the mutex and done without it.
type readPlan struct {
	n       int  // bytes to read (up to the end of the file)
	locked  bool // overlaps unflushed writes: read with the mutex held
	recs    map[uint64]meta.StripeRec
	entries map[uint64]*cacheEntry // referenced whole stripes
	lay     meta.Layout
	ino     meta.Ino
	// stream is the sequential stream the read continues and reads ahead
	// for, if any: while the read waits, arriving stripes refill its
	// window (refill.go).
	stream *readStream
}

// dropFailed drops from the cache the entries of pl whose reads failed, so
// that the next read tries again. f.mu is not held.
func (f *File) dropFailed(pl *readPlan) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for s, e := range pl.entries {
		if e.failed() && f.mu.cache.entries[s] == e {
			f.mu.cache.drop(s)
		}
	}
}

func (pl *readPlan) release() {
	for _, e := range pl.entries {
		e.unref()
	}
}

// planLocked decides how to read len(p) bytes at off: it fetches the
// stripe records, takes references on (or starts) whole-stripe reads of
// the cache, and starts readahead.
func (f *File) planLocked(ctx context.Context, p []byte, off int64) (*readPlan, error) {
	if off >= f.mu.size {
		return &readPlan{}, io.EOF
	}
	pl := &readPlan{lay: f.mu.attr.Layout, ino: f.mu.attr.Ino}
	pl.n = int(min(int64(len(p)), f.mu.size-off))
	sb := f.stripeBytes()
	// Which sequential stream the read continues, if any (streams.go).
	st, sequential := f.mu.streams.match(off, off+int64(pl.n), sb)
	f.mu.cache.max = f.cacheSizeLocked()
	first, last := uint64(off/sb), uint64((off+int64(pl.n)-1)/sb)
	for s := first; s <= last; s++ {
		if f.pendingLocked(s) {
			pl.locked = true
			return pl, nil
		}
	}
	recs, err := f.recordsLocked(ctx, first, last)
	if err != nil {
		return nil, err
	}
	pl.recs = recs
	// Whole stripes: a stripe already in the cache is read from it
	// whatever the pattern; new whole-stripe reads (and readahead) are
	// for streams and for reads of half a stripe or more, the rest reads
	// shard ranges.
	whole := st.established() || pl.n >= int(sb)/2
	for s := first; s <= last; s++ {
		rec := recs[s]
		if rec.Gen == 0 {
			continue
		}
		e := f.mu.cache.get(s, rec.Gen)
		if e == nil && whole {
			e = f.fillLocked(rec, nil, true)
			e.ref() // the cache's own reference keeps e until f.mu is released
		}
		if e != nil {
			if pl.entries == nil {
				pl.entries = map[uint64]*cacheEntry{}
			}
			pl.entries[s] = e
		}
	}
	if whole && sequential {
		f.readAhead(last+1, sb, f.aheadLocked(st), f.mu.streams.limit(st, off+int64(pl.n)))
		pl.stream = st
	}
	return pl, nil
}

// readPlan reads the planned bytes into p without the mutex.
func (f *File) readPlan(ctx context.Context, pl *readPlan, p []byte, off int64) error {
	sb := StripeBytes(pl.lay) // f.mu.attr changes at commits
	for pc := range pieces(off, pl.n, sb) {
		dst := p[pc.done : pc.done+pc.n]
		rec := pl.recs[pc.s]
		switch e := pl.entries[pc.s]; {
		case rec.Gen == 0:
			clear(dst)
		case e != nil:
			if err := f.waitFor(ctx, e, pl.stream); err != nil {
				return err
			}
			e.copyOut(dst, pc.in)
			e.read.Add(int64(len(dst)))
		default:
			f.rangeReads.Add(1)
			if err := f.c.readRange(ctx, pl.lay, pl.ino, rec, pc.in, dst, f.name); err != nil {
				return err
			}
		}
	}
	return nil
}

// readLocked reads with the mutex held: the handle's unflushed writes
// (dirty and in flight) are laid over the committed bytes.
//
// A read over records found stale (errStale) drops them and reads again,
// as readUnlock does.
func (f *File) readLocked(ctx context.Context, p []byte, off int64) (int, error) {
	return retryStale(func() (int, error) { return f.readLockedOnce(ctx, p, off) }, func() { f.dropRecordsLocked(off, len(p)) })
}

// readLockedOnce is one attempt of readLocked.
func (f *File) readLockedOnce(ctx context.Context, p []byte, off int64) (int, error) {
	if off >= f.mu.size {
		return 0, io.EOF
	}
	want := len(p)
	n := int(min(int64(want), f.mu.size-off))
	p = p[:n]
	sb := f.stripeBytes()
	first, last := uint64(off/sb), uint64((off+int64(n)-1)/sb)
	byNo, err := f.recordsLocked(ctx, first, last)
	if err != nil {
		return 0, err
	}
	for pc := range pieces(off, n, sb) {
		dst := p[pc.done : pc.done+pc.n]
		if rec := byNo[pc.s]; rec.Gen == 0 {
			clear(dst)
		} else if err := f.c.readRange(ctx, f.mu.attr.Layout, f.mu.attr.Ino, rec, pc.in, dst, f.name); err != nil {
			return pc.done, err
		}
		f.overlayLocked(pc.s, dst, pc.in)
	}
	if n < want {
		return n, io.EOF
	}
	return n, nil
}

// fillLocked adds a cache entry for a committed stripe and starts reading
// the stripe whole into it; release, if not nil, runs when the entry's
// buffers are let go. taken says a read is waiting for it (not readahead).
func (f *File) fillLocked(rec meta.StripeRec, release func(), taken bool) *cacheEntry {
	e := f.mu.cache.start(rec.Stripe, rec.Gen, taken, f.mu.streams.busy(f.stripeBytes()))
	ctx, cancel := context.WithCancel(context.Background())
	e.release, e.cancel = release, cancel
	f.wholeReads.Add(1)
	lay, ino, name := f.mu.attr.Layout, f.mu.attr.Ino, f.name
	go func() {
		defer cancel()
		f.c.fillEntry(ctx, e, rec, lay, ino, name)
		f.refill(rec.Stripe, e)
	}()
	return e
}

// fillEntry reads a whole stripe into e and drops the filler's reference.
func (c *Client) fillEntry(ctx context.Context, e *cacheEntry, rec meta.StripeRec, lay meta.Layout, ino meta.Ino, name string) {
	pool := c.bufs.get(lay.K+lay.M, int(lay.Unit))
	b := pool.get()
	shards, err := c.readStripeDeltas(ctx, lay, ino, rec, b, name)
	if err != nil {
		pool.put(b)
		e.err = err
	} else {
		e.b, e.pool, e.shards = b, pool, shards
		e.shard, e.len = int(rec.ShardSize), int(rec.Len)
	}
	close(e.ready)
	e.unref()
}

// readAhead starts reading the next stripes in the background: window
// stripes from stripe from on (a stream's aheadLocked), up to the stripe
// that holds the byte before stop (where another reader's part starts,
// readStreams.limit; -1: none) and the end of the file, as far as the
// client's read-ahead budget (Options.ReadAheadTotal) allows, the cache
// has room without letting go of stripes read ahead and not yet read, and
// fewer than Options.StripesInFlight stripes per active stream are being
// read. The window fills as its stripes arrive (each read starts what the
// bound lets it), not all at once: over a slow link a reader that stops
// (at the end of its part of a shared file, which the File cannot know)
// leaves at most the in-flight stripes fetched for nothing, not the
// window.
func (f *File) readAhead(from uint64, sb int64, window int, stop int64) {
	last := (f.mu.size - 1) / sb
	if stop >= 0 {
		last = min(last, (stop-1)/sb)
	}
	reading, bound := f.mu.cache.filling(), f.c.opts.StripesInFlight*f.mu.streams.active()
	for s := from; s < from+uint64(window) && int64(s) <= last; s++ {
		if f.heldLocked(s) {
			continue
		}
		if reading >= bound {
			return
		}
		if !f.mu.cache.room(f.mu.streams.busy(sb)) {
			return
		}
		recs, err := f.recordsLocked(context.Background(), s, s)
		if err != nil || recs[s].Gen == 0 {
			return
		}
		select {
		case f.c.ahead <- struct{}{}:
		default:
			return // spent: reads fill what they need themselves
		}
		f.fillLocked(recs[s], f.c.aheadDone, false)
		reading++
	}
}

// heldLocked reports whether stripe s is in the cache, being written or
// buffered: readahead has nothing to start for it.
func (f *File) heldLocked(s uint64) bool {
	return f.mu.cache.has(s) || f.pendingLocked(s)
}

// pendingLocked reports whether stripe s has bytes f has not committed:
// dirty, in a batch or a full stripe being written in the background.
func (f *File) pendingLocked(s uint64) bool {
	if f.mu.inflight[s] != nil || f.mu.dirty[s] != nil {
		return true
	}
	for _, b := range f.mu.batches {
		if b.dirty[s] != nil {
			return true
		}
	}
	return false
}

// overlayLocked lays the bytes of stripe s that f has not committed (or
// whose commit may have landed since the committed bytes were read) over
// dst, which holds stripe bytes [at, at+len(dst)): those in the
// background in the order they were handed over, then the dirty ones.
func (f *File) overlayLocked(s uint64, dst []byte, at int) {
	in := f.mu.inflight[s]
	for _, b := range f.mu.batches {
		d := b.dirty[s]
		if d == nil {
			continue
		}
		if in != nil && in.seq < b.seq {
			in.d.overlay(dst, at)
			in = nil
		}
		d.overlay(dst, at)
	}
	if in != nil {
		in.d.overlay(dst, at)
	}
	if d := f.mu.dirty[s]; d != nil {
		d.overlay(dst, at)
	}
}

// readRange reads bytes [in, in+len(dst)) of a committed stripe by reading
// only the blocks of the data fragments that hold them, checking their
// checksums. It falls back to a whole-stripe read (readStripe: degraded,
// hedged, repairing) when a fragment it needs is on a drive known to be
// missing or slow, when a part fails, and when a part is later than the
// hedging bound; the parts still running are then cancelled and their
// bytes ignored (they are read into buffers of their own). A patient read
// (a fold's, see patient) falls back only for a drive that is missing or
// down and for a part that fails: it waits for a late part and reads from
// a slow drive.
func (c *Client) readRange(ctx context.Context, lay meta.Layout, ino meta.Ino, rec meta.StripeRec, in int, dst []byte, name string) error {
	s := int(rec.ShardSize)
	end := in + len(dst)
	if in >= int(rec.Len) {
		clear(dst)
		return nil
	}
	m, err := c.Map(ctx)
	if err != nil {
		return err
	}
	var parts []shardRange
	direct, patient := true, isPatient(ctx)
	now := time.Now()
	for pos := in; pos < min(end, int(rec.Len)); {
		idx, o := pos/s, pos%s
		n := min(s-o, min(end, int(rec.Len))-pos)
		parts = append(parts, shardRange{idx, o, n, pos - in})
		pos += n
		if !c.rangeReadable(m, placement.DriveID(rec.Drives[idx]), now, patient) {
			direct = false
		}
	}
	clear(dst)
	if direct && c.readParts(ctx, m, ino, rec, parts, dst) {
		return c.overlayDeltas(ctx, lay, ino, rec, in, dst, name)
	}
	e := newCacheEntry(rec.Gen, 2)
	c.fillEntry(ctx, e, rec, lay, ino, name)
	defer e.unref()
	if e.err != nil {
		return e.err
	}
	e.copyOut(dst, in)
	return nil
}

// rangeReadable reports whether a ranged read from drive id is worth
// trying: the drive is not down or missing, and, unless the read is
// patient, not one the client finds slow or avoids.
func (c *Client) rangeReadable(m *clustermap.Map, id placement.DriveID, now time.Time, patient bool) bool {
	if d, err := m.Drive(id); err == nil && (knownMissing(d.State) || d.State == clustermap.StateDown) {
		return false
	}
	return !(c.lat.Avoid(id) && !patient) && !c.avoids(m, id, now)
}

// shardRange is bytes [off, off+n) of fragment idx's shard, which go to
// dst[at:] of a ranged read.
type shardRange struct{ idx, off, n, at int }

// readParts reads the ranges in parallel and copies them into dst, in the
// calling goroutine, once all have arrived. It reports false, having
// copied nothing, if one fails or, unless ctx is patient, is still running
// after the hedging bound.
func (c *Client) readParts(ctx context.Context, m *clustermap.Map, ino meta.Ino, rec meta.StripeRec, parts []shardRange, dst []byte) bool {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		i      int
		b, buf []byte // buf: the pooled buffer b is in, if any
	}
	results := make(chan result, len(parts)) // never blocks a part given up on
	for i, p := range parts {
		go func() {
			var buf []byte
			b, err := c.readShardRange(ctx, m, ino, rec, p.idx, p.off, p.n, func(n int) []byte {
				buf = c.byteBufs.Get(n)
				return buf
			})
			if err != nil {
				b = nil
			}
			results <- result{i, b, buf}
		}()
	}
	var late <-chan time.Time // never, for a patient read
	if !isPatient(ctx) {
		var bound time.Duration
		for _, p := range parts {
			bound = max(bound, c.lat.Bound(placement.DriveID(rec.Drives[p.idx])))
		}
		t := time.NewTimer(bound)
		defer t.Stop()
		late = t.C
	}
	// The pooled buffers of the parts received go back once their bytes
	// are copied out, or given up; those of parts given up on before they
	// ended are left to the garbage collector (a read may still fill one).
	got := make([]result, 0, len(parts))
	defer func() {
		for _, r := range got {
			c.byteBufs.Put(r.buf)
		}
	}()
	for range parts {
		select {
		case r := <-results:
			got = append(got, r)
			if r.b == nil {
				return false
			}
		case <-late:
			return false
		case <-ctx.Done():
			return false
		}
	}
	for _, r := range got {
		copy(dst[parts[r.i].at:], r.b)
	}
	return true
}

// readShardRange reads shard bytes [off, off+n) of fragment idx, verifying
// the blocks that hold them, into a buffer from alloc (nil: a new one;
// stripeio.ReadRange).
func (c *Client) readShardRange(ctx context.Context, mp *clustermap.Map, ino meta.Ino, rec meta.StripeRec, idx, off, n int, alloc func(n int) []byte) ([]byte, error) {
	id := placement.DriveID(rec.Drives[idx])
	d, err := c.drives.Drive(mp, id)
	if err != nil {
		return nil, err
	}
	st := &stripeio.Stripe{Ino: uint64(ino), Stripe: rec.Stripe, Gen: rec.Gen, Len: rec.Len, ShardSize: int(rec.ShardSize)}
	h, err := c.header(ctx, d, id, st, idx)
	if err != nil {
		return nil, err
	}
	return stripeio.ReadRange(ctx, d, id, st, idx, &h, off, n, alloc)
}

// recBatch is how many stripe records a read fetches at once.
const recBatch = 64

// recordsLocked returns the committed records of stripes [first, last]
// (a record with Gen 0 marks a hole), from the handle's cache or the
// metadata service, which it asks for recBatch stripes at a time. The cache
// lives as long as the handle (close-to-open); the handle's own commits
// drop their entries.
func (f *File) recordsLocked(ctx context.Context, first, last uint64) (map[uint64]meta.StripeRec, error) {
	out := make(map[uint64]meta.StripeRec, last-first+1)
	for s := first; s <= last; s++ {
		r, ok := f.mu.recs[s]
		if !ok {
			end := max(last, s+recBatch-1)
			recs, err := f.c.meta.Stripes(ctx, f.mu.attr.Ino, s, end)
			if err != nil {
				return nil, err
			}
			for x := s; x <= end; x++ {
				f.mu.recs[x] = meta.StripeRec{Stripe: x} // hole unless listed
			}
			for _, rr := range recs {
				f.mu.recs[rr.Stripe] = rr
			}
			r = f.mu.recs[s]
		}
		out[s] = r
	}
	return out, nil
}

// patientKey marks the context of a read that wants throughput rather
// than latency.
type patientKey struct{}

// patient returns ctx marked for reads that want throughput rather than
// latency: a fold's, in the background, which reads a stripe and the parts
// of its extents and waits for them anyway. A ranged read of such a caller
// waits for a late part instead of reading the whole stripe in its place.
// When the drives were busy (the folds and write-backs of random writes
// share them), the parts of extents in log stripes were often later than
// the hedging bound, and each one late made the fold read its whole log
// stripe, 128 times the bytes of a 64 KiB part: 58% of the bytes read from
// the drives in a run of random 64 KiB writes, the drives then busier
// still, more parts late.
func patient(ctx context.Context) context.Context {
	return context.WithValue(ctx, patientKey{}, true)
}

func isPatient(ctx context.Context) bool { return ctx.Value(patientKey{}) != nil }
