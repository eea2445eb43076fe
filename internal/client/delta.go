package client

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"poolfs/internal/erasure"
	"poolfs/internal/meta"
)

// Small writes go to a delta log (docs/small-writes.md).
//
// A dirty stripe that the handle wrote only in part, over a committed
// generation, is not merged into a new generation of the whole stripe
// when it is written back: its dirty bytes are packed, with those of the
// other such stripes of the same writeback, into log stripes of the file,
// ordinary stripes numbered from meta.LogStripeBase on, and committed as
// delta extents over the stripes' generations (meta.Store.CommitDeltas,
// compare-and-set on those generations). A read lays a stripe's extents,
// in commit order, over its generation's bytes. The background fold
// (fold.go) writes stripes with many delta bytes as new generations and
// drops their extents. The log stripes' fragments are durable before the
// commit that makes them reachable, so there is no write hole either way.

// deltaMinECShard is the smallest shard a log stripe is erasure-coded
// with: below it a log stripe is a mirror of 1+M copies (as a small
// file's stripe is), which writes fewer, larger fragments.
const deltaMinECShard = 64 << 10

// logLayout returns the layout a log stripe of l bytes of a file with
// layout lay is written with: lay when every data fragment gets at least
// deltaMinECShard bytes, else a mirror of 1+M copies (l is at most one
// unit then).
func logLayout(lay meta.Layout, l int) meta.Layout {
	if lay.K == 1 || l >= lay.K*deltaMinECShard || l > int(lay.Unit) {
		return lay
	}
	lay.K, lay.Mirror = 1, true
	return lay
}

// deltaOKLocked reports whether dirty stripe d over committed record old
// is written back as delta extents: it must lie within the committed
// stripe and the file's committed size (extents change neither) and hold less than half of it (a
// stripe written mostly anew is cheaper rewritten whole), and its bytes
// with old's extents must not reach foldCover of it (such a stripe is
// merged into a new generation at once: the fold it would be due for,
// without writing its bytes to the log first).
func (f *File) deltaOKLocked(d *dirtyStripe, old meta.StripeRec) bool {
	sb := f.stripeBytes()
	if !f.deltaFits(d, old, sb, int64(f.mu.attr.Size)) {
		return false
	}
	n := int64(d.bytes()) + old.DeltaSum().Bytes
	return 4*n < foldCover*sb
}

// logBuf is one log stripe being packed: its length and the extents it
// holds, whose bytes are those of the dirty stripes src (read when the
// log stripe is written, straight into its shards).
type logBuf struct {
	n      int
	deltas []meta.Delta
	src    map[uint64]*dirtyStripe
}

// packDeltas packs the bytes of dirty stripes todo into log stripes of
// at most sb bytes each, back to back, as extents (their BaseGen left 0:
// the caller sets it from the records it commits them over). The dirty
// stripes must not change until the log stripes are written.
func packDeltas(dirty map[uint64]*dirtyStripe, todo []uint64, sb int) []*logBuf {
	var logs []*logBuf
	lb := &logBuf{src: dirty}
	for _, s := range todo {
		d := dirty[s]
		for _, sp := range d.spans {
			for a := sp.a; a < sp.b; {
				if lb.n == sb {
					logs, lb = append(logs, lb), &logBuf{src: dirty}
				}
				n := min(sp.b-a, sb-lb.n)
				lb.deltas = append(lb.deltas, meta.Delta{Stripe: s, Off: uint32(a), Len: uint32(n), LogOff: uint32(lb.n)})
				lb.n += n
				a += n
			}
		}
	}
	if lb.n > 0 {
		logs = append(logs, lb)
	}
	return logs
}

// fill lays lb's bytes into the k data shards of b in the full-unit
// layout (byte i in shard i/unit), as fillShards does from a flat copy:
// the extents cover the log stripe from 0 to n without a gap.
func (lb *logBuf) fill(b *stripeBuf, k, unit int) {
	for _, x := range lb.deltas {
		d := lb.src[x.Stripe]
		for at, end := int(x.LogOff), int(x.LogOff+x.Len); at < end; {
			i, off := at/unit, at%unit
			if i >= k {
				return // cannot be: n is at most k units
			}
			n := min(unit-off, end-at)
			d.overlay(b.shard(i, unit)[off:off+n], int(x.Off)+at-int(x.LogOff))
			at += n
		}
	}
}

// writeLogs writes log stripes of file ino (layout lay) and returns their
// records, numbered LogStripeBase | a generation-like number (time and
// random bits), distinct within the call; one another writer took makes
// the commit a conflict. It does not commit; on error nothing is left
// but what the collector removes.
func (f *File) writeLogs(ctx context.Context, lay meta.Layout, ino meta.Ino, logs []*logBuf) ([]meta.StripeCommit, error) {
	idx, nos := make([]uint64, len(logs)), make([]uint64, len(logs))
	var prev uint64
	for i := range logs {
		prev = newGen(prev)
		idx[i], nos[i] = uint64(i), meta.LogStripeBase|prev
	}
	return f.writeStripesEach(ctx, lay, ino, "write delta log of", idx, func(ctx context.Context, i uint64, b *stripeBuf) (meta.StripeCommit, error) {
		lb := logs[i]
		unit := int(lay.Unit)
		lb.fill(b, lay.K, unit)
		ll := logLayout(lay, lb.n)
		// The log cache takes a full log stripe's shards after the
		// write; a short one is copied first: writeStripe lays its
		// shards out anew in b.
		whole := !ll.Mirror && erasure.ShardSize(lb.n, lay.K, unit) == unit
		var short *logEntry
		if !whole {
			short = f.c.logs.copyOf(b, unit, lb.n)
		}
		rec, err := f.c.writeStripe(ctx, ll, ino, nos[i], 0, b, lb.n)
		switch {
		case err != nil:
			f.c.logs.release(short)
		case short != nil:
			f.c.logs.put(ino, rec, short)
		case whole:
			f.c.logs.swap(ino, rec, b, lay.K, unit, lb.n)
		}
		return meta.StripeCommit{Rec: rec}, err
	})
}

// errStopped is the error of a commit that the test hook logWritten
// stopped, as a crash would: its fragments are left where they are.
var errStopped = errors.New("stopped before the commit")

// commitLogs commits the written log stripes (commits, of logs) of file
// ino as delta extents; with the test hook logWritten set, that runs
// first and may stop the commit as a crash would.
func (c *Client) commitLogs(ctx context.Context, ino meta.Ino, name string, logs []*logBuf, commits []meta.StripeCommit, mtime int64) (meta.Attr, error) {
	lcs := make([]meta.LogCommit, 0, len(logs))
	for i, cm := range commits {
		lcs = append(lcs, meta.LogCommit{Rec: cm.Rec, Deltas: logs[i].deltas})
	}
	if c.logWritten != nil && !c.logWritten(lcs) {
		return meta.Attr{}, fmt.Errorf("commit %s: delta log %w", name, errStopped)
	}
	if mtime == 0 {
		mtime = time.Now().UnixNano()
	}
	a, err := c.meta.CommitDeltas(ctx, ino, lcs, mtime)
	if err != nil {
		if errors.Is(err, meta.ErrPoolFull) {
			err = fmt.Errorf("%w: %v", ErrPoolFull, err)
		}
		return meta.Attr{}, fmt.Errorf("commit %s: %w", name, err)
	}
	// The log stripes count in the pool's usage from now on: the cached
	// figure learns it at once, so that the delta budget's share of the
	// pool's room (roomLocked) does not count them as free until the
	// next fetch (a fast writer took the log past its share).
	var raw uint64
	for _, cm := range commits {
		raw += uint64(cm.Rec.ShardSize) * uint64(len(cm.Rec.Drives))
	}
	c.space.grew(a.Layout.Pool, raw)
	return a, nil
}

// logDeltasLocked writes the dirty bytes of stripes todo (each over its
// committed record in cur) into log stripes and commits them as delta
// extents. On error nothing is committed, and the log stripes' fragments
// are deleted (best effort; the collector finds what is left).
func (f *File) logDeltasLocked(ctx context.Context, todo []uint64, cur map[uint64]meta.StripeRec) error {
	lay := f.mu.attr.Layout
	ino := f.mu.attr.Ino
	logs := packDeltas(f.mu.dirty, todo, int(f.stripeBytes()))
	for _, lb := range logs {
		for i := range lb.deltas {
			lb.deltas[i].BaseGen = cur[lb.deltas[i].Stripe].Gen
		}
	}
	commits, err := f.writeLogs(ctx, lay, ino, logs)
	if err != nil {
		return err
	}
	a, err := f.c.commitLogs(ctx, ino, f.name, logs, commits, f.mu.mtime)
	if err != nil {
		if !errors.Is(err, errStopped) {
			f.c.discard(ctx, ino, commits)
		}
		return err
	}
	size := f.mu.size
	f.mu.attr = a
	f.mu.size = max(size, int64(a.Size))
	for _, s := range todo {
		delete(f.mu.recs, s)
		f.mu.cache.drop(s)
	}
	f.noteDeltasLocked(todo, cur, logs, commits)
	return nil
}

// stripeRecords returns the committed records (with their extents) of
// the sorted stripes todo, by stripe number: unless they are dense in
// their range, asking for each run of consecutive stripes alone, so that
// a write-back of a few stripes scattered over a file does not read the
// records and extents of every stripe between them.
func (c *Client) stripeRecords(ctx context.Context, ino meta.Ino, todo []uint64) (map[uint64]meta.StripeRec, error) {
	return recordsOf(ctx, ino, todo, c.meta.Stripes)
}

// stripeHeads is stripeRecords with the summary of each record's extents
// (StripeRec.Sum) in place of the extents: what a write-back needs to
// commit extents over the records, and to know when to fold, without
// reading every extent of every stripe it touches.
func (c *Client) stripeHeads(ctx context.Context, ino meta.Ino, todo []uint64) (map[uint64]meta.StripeRec, error) {
	return recordsOf(ctx, ino, todo, c.meta.StripeHeads)
}

// recordsOf is stripeRecords with the records read by get.
func recordsOf(ctx context.Context, ino meta.Ino, todo []uint64, get func(ctx context.Context, ino meta.Ino, first, last uint64) ([]meta.StripeRec, error)) (map[uint64]meta.StripeRec, error) {
	cur := make(map[uint64]meta.StripeRec, len(todo))
	if first, last := todo[0], todo[len(todo)-1]; uint64(len(todo))*4 >= last-first+1 {
		// Dense: one call for the range costs less than a call a run.
		recs, err := get(ctx, ino, first, last)
		for _, r := range recs {
			cur[r.Stripe] = r
		}
		return cur, err
	}
	for i := 0; i < len(todo); {
		j := i + 1
		for j < len(todo) && todo[j] == todo[j-1]+1 {
			j++
		}
		recs, err := get(ctx, ino, todo[i], todo[j-1])
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			cur[r.Stripe] = r
		}
		i = j
	}
	return cur, nil
}

// readStripeDeltas is readStripe with rec's delta extents laid over the
// shards it returns: a stripe's content.
func (c *Client) readStripeDeltas(ctx context.Context, lay meta.Layout, ino meta.Ino, rec meta.StripeRec, b *stripeBuf, name string) ([][]byte, error) {
	shards, err := c.readStripe(ctx, lay, ino, rec, b, name)
	if err != nil || len(rec.Deltas) == 0 {
		return shards, err
	}
	err = c.eachDelta(ctx, lay, ino, rec, 0, int(rec.Len), name, intoShards(shards, int(rec.ShardSize)))
	if err != nil {
		return nil, err
	}
	return shards, nil
}

// intoShards returns an eachDelta put that copies stripe bytes into the
// data shards of size s that hold them.
func intoShards(shards [][]byte, s int) func(at int, p []byte) {
	return func(at int, p []byte) {
		for len(p) > 0 {
			n := copy(shards[at/s][at%s:], p)
			p, at = p[n:], at+n
		}
	}
}

// overlayDeltas copies rec's extents over dst, which holds bytes [in,
// in+len(dst)) of rec's generation.
func (c *Client) overlayDeltas(ctx context.Context, lay meta.Layout, ino meta.Ino, rec meta.StripeRec, in int, dst []byte, name string) error {
	if len(rec.Deltas) == 0 {
		return nil
	}
	return c.eachDelta(ctx, lay, ino, rec, in, in+len(dst), name, func(at int, p []byte) {
		copy(dst[at-in:], p)
	})
}

// eachDelta reads the parts of rec's extents within stripe bytes [lo, hi)
// from their log stripes (readDeltas) and then calls put with each
// part's stripe offset and bytes in commit order, so later extents win.
func (c *Client) eachDelta(ctx context.Context, lay meta.Layout, ino meta.Ino, rec meta.StripeRec, lo, hi int, name string, put func(at int, p []byte)) error {
	ps, err := c.readDeltas(ctx, lay, ino, rec, lo, hi, name)
	if err != nil {
		return err
	}
	ps.apply(put)
	ps.release(c)
	return nil
}

// deltaPart is the part [a, b) of a stripe's bytes that extent d holds
// and no later extent covers whole, and its bytes once read.
type deltaPart struct {
	d    meta.Delta
	a, b int
	buf  []byte
}

// deltaParts are the parts of a stripe's extents, in commit order, and
// the pooled buffers (Client.byteBufs) their bytes are in.
type deltaParts struct {
	parts []*deltaPart
	bufs  [][]byte
}

// apply calls put with each part's stripe offset and bytes, in commit
// order, so later extents win.
func (ps *deltaParts) apply(put func(at int, p []byte)) {
	for _, p := range ps.parts {
		put(p.a, p.buf)
	}
}

// release hands the parts' buffers back to c's pool; the parts' bytes
// must not be used after.
func (ps *deltaParts) release(c *Client) {
	for _, b := range ps.bufs {
		c.byteBufs.Put(b)
	}
	*ps = deltaParts{}
}

// readDeltas reads the parts of rec's extents within stripe bytes [lo, hi)
// from their log stripes, in parallel (ranged reads). Parts that a later
// extent covers whole are not read, and parts that lie close together in
// one log stripe (the extents of one stripe that one write-back packed
// side by side) are read as one range.
func (c *Client) readDeltas(ctx context.Context, lay meta.Layout, ino meta.Ino, rec meta.StripeRec, lo, hi int, name string) (*deltaParts, error) {
	type part = deltaPart
	// From the last extent back: a part the later extents cover whole
	// is not read.
	var parts []*part
	var later spanSet
	for i := len(rec.Deltas) - 1; i >= 0; i-- {
		d := rec.Deltas[i]
		a, b := max(int(d.Off), lo), min(int(d.Off)+int(d.Len), hi)
		if a < b && !later.covers(a, b) {
			parts = append(parts, &part{d: d, a: a, b: b})
		}
		later.add(int(d.Off), int(d.Off)+int(d.Len))
	}
	slices.Reverse(parts)
	// logAt is where part p's bytes begin in its log stripe.
	logAt := func(p *part) int { return int(p.d.LogOff) + p.a - int(p.d.Off) }
	byLog := slices.Clone(parts)
	slices.SortStableFunc(byLog, func(x, y *part) int {
		return cmp.Or(cmp.Compare(x.d.Log, y.d.Log), cmp.Compare(logAt(x), logAt(y)))
	})
	var runs [][]*part // parts read as one range of one log stripe
	for i, p := range byLog {
		if i > 0 {
			r := runs[len(runs)-1]
			first, last := r[0], r[len(r)-1]
			end := logAt(last) + last.b - last.a
			if p.d.Log == first.d.Log && logAt(p) <= end+deltaReadGap && logAt(p)+p.b-p.a-logAt(first) <= deltaReadMax {
				runs[len(runs)-1] = append(r, p)
				continue
			}
		}
		runs = append(runs, []*part{p})
	}
	errs := make([]error, len(runs))
	bufs := make([][]byte, len(runs))
	var wg sync.WaitGroup
	for i, r := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			from, to := logAt(r[0]), 0
			for _, p := range r {
				to = max(to, logAt(p)+p.b-p.a)
			}
			buf := c.byteBufs.Get(to - from)
			bufs[i] = buf
			if !c.logs.read(ino, r[0].d.LogRec, from, buf) {
				if err := c.readRange(ctx, lay, ino, r[0].d.LogRec, from, buf, name); err != nil {
					errs[i] = fmt.Errorf("delta %d of stripe %d (log stripe %#x): %w", r[0].d.Seq, rec.Stripe, r[0].d.Log, err)
					return
				}
			}
			for _, p := range r {
				at := logAt(p) - from
				p.buf = buf[at : at+p.b-p.a]
			}
		}()
	}
	wg.Wait()
	ps := &deltaParts{parts: parts, bufs: bufs}
	if err := errors.Join(errs...); err != nil {
		ps.release(c)
		return nil, err
	}
	return ps, nil
}

// deltaReadGap is the most bytes between two extents' parts in one log
// stripe that eachDelta reads through to read both as one range (a
// checksum block: a ranged read reads whole blocks anyway), and
// deltaReadMax the most bytes of one such range.
const (
	deltaReadGap = 64 << 10
	deltaReadMax = 1 << 20
)

// maxDeltaSeq is the sequence number of rec's last extent (0: none).
func maxDeltaSeq(rec meta.StripeRec) uint64 {
	if n := len(rec.Deltas); n > 0 {
		return rec.Deltas[n-1].Seq
	}
	return 0
}
