package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"runtime"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"poolfs/internal/meta"
)

// File is an open file for random-access I/O, as the FUSE mount uses it.
//
// Consistency is close-to-open: the attributes and stripe map are read at
// Open; writes are buffered per stripe and become visible to others at
// Flush (durable at Sync, sync.go), which writes each dirty stripe as a new generation
// (reading and merging the committed one when the handle wrote only part of
// it), or a small part of a stripe as delta extents in a log stripe
// (delta.go), and commits them with compare-and-set. When another writer committed a
// stripe first (writers of disjoint ranges of one shared file, IOR's N-to-1
// pattern), Flush re-reads that stripe, re-applies this handle's ranges and
// tries again, so no writer's bytes are lost.
//
// A File is safe for concurrent use; operations on one handle are serialised.
type File struct {
	c    *Client
	name string
	wb   writeBehind
	// mark is the ErrMark of WriteAt and Flush, for users with one
	// descriptor per File.
	mark ErrMark
	// wholeReads and rangeReads count committed stripes read whole (into
	// the stripe cache, sequential reads) and shard ranges read for a
	// request alone (random reads); see ReadCounts.
	wholeReads, rangeReads atomic.Int64
	// waiting is how many reads of a stream wait for a stripe being
	// filled: while one waits, each stripe that arrives starts read-ahead
	// for its stream (refill.go).
	waiting atomic.Int32
	// held is the space f's dirty stripes hold in the client's spaceGate.
	held *fileHeld

	mu struct {
		sync.Mutex
		attr     meta.Attr
		size     int64                     // size including unflushed writes
		dirty    map[uint64]*dirtyStripe   // stripe number -> buffered writes
		openSize int64                     // committed size when opened
		gens     map[uint64]uint64         // generations this handle committed
		recs     map[uint64]meta.StripeRec // committed records read (close-to-open cache)
		// inflight are full stripes being written in the background.
		inflight map[uint64]*inflight
		cache    *stripeCache // committed stripes read whole (sequential reads)
		streams  readStreams  // the sequential readers of the file (streams.go)
		// mtime, if not 0, is the mtime set explicitly (Setattr) since
		// the last write: commits keep it instead of taking the time of
		// the flush (file_attr.go).
		mtime int64
		fold  foldState // delta extents known and folds running (fold.go)
		// batches are the write-backs running in the background, in the
		// order they were handed over (writeback.go); wseq numbers them
		// and the full stripes in flight in that order.
		batches []*batch
		wseq    uint64
		// dirtyEst bounds the bytes of dirty: bytes written since
		// overDirtyLocked last counted them.
		dirtyEst int64
		// counted is what overDirtyLocked's last count of dirty found,
		// and promoted how many dirty stripes took a stripe buffer
		// since: with dirtyEst, bounds on what a count would find now.
		counted  dirtyCount
		promoted int
	}
}

// dirtyCount is a count of a File's dirty stripes (overDirtyLocked): the
// stripes with stripe buffers, the bytes of the sparse ones, and the
// dirty bytes (dirtyEst) when it was made.
type dirtyCount struct {
	big         int
	sparseBytes int64
	est         int64
}

// maxDirtyFactor × StripesInFlight is maxDirty.
const maxDirtyFactor = 2

// maxDirty is the number of dirty stripes with stripe buffers a handle
// buffers before a write writes the complete ones back (or all of them).
func (f *File) maxDirty() int { return maxDirtyFactor * f.c.opts.StripesInFlight }

// maxSparse is the most stripes a handle keeps sparse dirty bytes of
// (small writes all over a file) before it writes them back.
const maxSparse = 4096

// overDirtyLocked reports whether f's dirty stripes, with addStripes more
// sparse ones holding addBytes more, pass the write-back limit: more than
// maxDirty stripes with stripe buffers; or sparse ones holding more than a
// quarter of maxDirty stripes' bytes (small random writes are written
// back in batches this large, so their delta log stripes are full ones);
// or more than maxSparse sparse stripes.
//
// f.mu.dirtyEst, a bound on the dirty bytes (every byte written since the
// last count), spares a write the count while it is far from the limit: a
// stripe holds a stripe buffer only with more than smallDirty bytes. So
// does the last count with what was written since (f.mu.counted,
// f.mu.promoted): small random writes all over a file keep hundreds of
// sparse stripes, which a count on every write walked through.
func (f *File) overDirtyLocked(addStripes, addBytes int) bool {
	limit := max(f.stripeBytes(), int64(f.maxDirty())*f.stripeBytes()/4)
	est := f.mu.dirtyEst + int64(addBytes)
	if len(f.mu.dirty)+addStripes <= maxSparse {
		if est <= limit && est/smallDirty <= int64(f.maxDirty()) {
			return false
		}
		c := &f.mu.counted
		if est >= c.est && c.big+f.mu.promoted <= f.maxDirty() && c.sparseBytes+est-c.est <= limit {
			return false
		}
	}
	big, sparse, bytes, all := 0, addStripes, int64(addBytes), int64(0)
	for _, d := range f.mu.dirty {
		n := int64(d.bytes())
		all += n
		if d.small() {
			sparse++
			bytes += n
		} else {
			big++
		}
	}
	f.mu.dirtyEst = all
	f.mu.counted = dirtyCount{big: big, sparseBytes: bytes - int64(addBytes), est: all}
	f.mu.promoted = 0
	return big > f.maxDirty() || sparse > maxSparse || bytes > limit
}

// Open returns a handle on file ino (name is used in errors).
func (c *Client) Open(ctx context.Context, ino meta.Ino, name string) (*File, error) {
	a, err := c.meta.Getattr(ctx, ino)
	if err != nil {
		return nil, err
	}
	return c.OpenAttr(a, name)
}

// OpenAttr returns a handle on the file whose current attributes are a
// (as the create that made it returned them), without asking the metadata
// service again.
func (c *Client) OpenAttr(a meta.Attr, name string) (*File, error) {
	if a.Type != meta.TypeFile {
		return nil, fmt.Errorf("open %s: %w", name, meta.ErrIsDir)
	}
	if a.Layout.K < 1 || a.Layout.Unit == 0 {
		return nil, fmt.Errorf("%w: file %s has no layout", meta.ErrInvalid, name)
	}
	f := &File{c: c, name: name}
	f.mu.attr = a
	f.mu.size = int64(a.Size)
	f.mu.dirty = map[uint64]*dirtyStripe{}
	f.mu.inflight = map[uint64]*inflight{}
	f.mu.gens = map[uint64]uint64{}
	f.mu.recs = map[uint64]meta.StripeRec{}
	f.mu.fold.gone = func(log uint64) { c.logs.drop(a.Ino, log) }
	f.mu.openSize = int64(a.Size)
	f.holdSpace()
	f.wb.sem = make(chan struct{}, c.opts.StripesInFlight)
	f.wb.shared = c.writeBehind
	f.wb.idle = sync.NewCond(&f.mu.Mutex)
	f.mu.cache = newStripeCache(c.opts.ReadAhead + c.opts.StripesInFlight)
	f.mu.streams.window = seqWindow
	// A File dropped without Close still gives its read-ahead stripes
	// back to the client's budget.
	runtime.AddCleanup(f, (*stripeCache).clear, f.mu.cache)
	return f, nil
}

// Revalidate is close-to-open for a File that is opened again while it is
// still open (a mount shares one File per inode among its descriptors,
// and the kernel may send the open before the release of the last one):
// it reads the attributes again and, if another client changed the file
// since f read them, takes them and forgets the records and stripes it
// read, so that this open sees what the other client committed. Bytes f
// holds unwritten stay (their flush merges over the committed stripes);
// the size is then the larger of the two.
func (f *File) Revalidate(ctx context.Context) error {
	f.mu.Lock()
	ino := f.mu.attr.Ino
	f.mu.Unlock()
	a, err := f.c.meta.Getattr(ctx, ino)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	old := f.mu.attr
	if a.Size == old.Size && a.Mtime == old.Mtime && a.Ctime == old.Ctime {
		return nil
	}
	f.mu.attr = a
	if len(f.mu.dirty) == 0 && len(f.mu.batches) == 0 && len(f.mu.inflight) == 0 {
		f.mu.size = int64(a.Size)
	} else {
		f.mu.size = max(f.mu.size, int64(a.Size))
	}
	f.mu.openSize = max(f.mu.openSize, int64(a.Size))
	clear(f.mu.gens)
	f.forgetStripesLocked()
	return nil
}

// Attr returns the attributes as this handle sees them (size includes
// unflushed writes).
func (f *File) Attr() meta.Attr {
	f.mu.Lock()
	defer f.mu.Unlock()
	a := f.mu.attr
	a.Size = uint64(f.mu.size)
	return a
}

// Close lets go of the stripes f has cached: their buffers go back to the
// client's pool, and those read ahead give back their share of the
// read-ahead budget (a File dropped without Close gives them back when
// the garbage collector finds it). It does not flush (Flush first). A
// File read after Close reads as before, filling its cache again.
func (f *File) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mu.cache.clear()
}

func (f *File) stripeBytes() int64 { return StripeBytes(f.mu.attr.Layout) }

// ReadCounts returns how many committed stripes this handle has read whole
// (sequential reads and their readahead) and how many shard ranges it read
// for one request alone (reads it took for random ones).
func (f *File) ReadCounts() (whole, ranges int64) {
	return f.wholeReads.Load(), f.rangeReads.Load()
}

// WriteAt buffers p at off. Errors from writing back earlier stripes are
// returned here or at Flush, once (f's own ErrMark).
func (f *File) WriteAt(ctx context.Context, p []byte, off int64) (int, error) {
	return f.WriteAtFor(ctx, &f.mark, p, off)
}

// WriteAtFor is WriteAt for the descriptor whose ErrMark is m: it returns
// a background write error m has not heard of yet, with n = 0 although p
// itself is buffered, so that a writer filling the pool stops at once
// (ENOSPC from write(2)) instead of learning at close that it wrote into
// nothing.
func (f *File) WriteAtFor(ctx context.Context, m *ErrMark, p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("%w: negative offset", meta.ErrInvalid)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.writeLocked(ctx, m, p, off, true)
}

// TryWriteAtFor is WriteAtFor that never waits: unless the mutex is free
// and the write only adds to the buffers (it completes no stripe, which
// would go to the background and may wait for a slot, and does not pass
// the limit of dirty stripes, which writes them back), it returns
// ErrWouldBlock at once, having changed nothing.
func (f *File) TryWriteAtFor(ctx context.Context, m *ErrMark, p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("%w: negative offset", meta.ErrInvalid)
	}
	if !f.mu.TryLock() {
		return 0, ErrWouldBlock
	}
	defer f.mu.Unlock()
	sb := f.stripeBytes()
	added := 0
	for pc := range pieces(off, len(p), sb) {
		d := f.mu.dirty[pc.s]
		switch {
		case d == nil && pc.n == int(sb):
			return 0, ErrWouldBlock
		case d == nil:
			added++
		case d.coversWith(span{pc.in, pc.in + pc.n}, int(sb)):
			return 0, ErrWouldBlock
		}
	}
	if f.overDirtyLocked(added, len(p)) {
		return 0, ErrWouldBlock
	}
	return f.writeLocked(ctx, m, p, off, false)
}

// piece is the part of a request that falls in one stripe.
type piece struct {
	s    uint64 // the stripe
	in   int    // offset in the stripe
	n    int    // bytes
	done int    // offset in the request
}

// pieces cuts the n bytes at off into their parts in stripes of sb bytes,
// in order.
func pieces(off int64, n int, sb int64) iter.Seq[piece] {
	return func(yield func(piece) bool) {
		for done := 0; done < n; {
			pos := off + int64(done)
			in := int(pos % sb)
			k := min(n-done, int(sb)-in)
			if !yield(piece{s: uint64(pos / sb), in: in, n: k, done: done}) {
				return
			}
			done += k
		}
	}
}

// writeLocked is WriteAtFor with f.mu held. A write the pool has no room
// for fails with ErrPoolFull before anything is buffered (admitLocked);
// with !wait, where admission would ask the metadata service, it fails
// with ErrWouldBlock having changed nothing.
func (f *File) writeLocked(ctx context.Context, m *ErrMark, p []byte, off int64, wait bool) (int, error) {
	holds, err := f.admitLocked(ctx, len(p), off, wait)
	if err != nil {
		return 0, err
	}
	sb := f.stripeBytes()
	for pc := range pieces(off, len(p), sb) {
		d := f.mu.dirty[pc.s]
		if d == nil {
			lay := f.mu.attr.Layout
			d = &dirtyStripe{k: lay.K, unit: int(lay.Unit), pool: f.c.bufs.get(lay.K+lay.M, int(lay.Unit)), partBufs: &f.c.byteBufs}
			f.mu.dirty[pc.s] = d
		}
		if h, ok := holds[pc.s]; ok {
			d.held = h
		}
		small := d.small()
		d.write(pc.in, p[pc.done:pc.done+pc.n])
		if small && !d.small() {
			f.mu.promoted++
		}
		f.mu.dirtyEst += int64(pc.n)
		f.mu.cache.drop(pc.s)
		if d.covers(int(sb)) {
			delete(f.mu.dirty, pc.s)
			f.startLocked(pc.s, d)
		}
	}
	if err := f.wroteLocked(ctx, m, off+int64(len(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// wroteLocked ends a write buffered up to end: the size and mtime follow
// it, a background write error m has not heard of is returned, and past
// the limit of dirty stripes they are written back.
func (f *File) wroteLocked(ctx context.Context, m *ErrMark, end int64) error {
	if end > f.mu.size {
		f.mu.size = end
	}
	f.mu.mtime = 0 // a write after an explicit mtime makes it "now" again
	if err := f.wb.errSince(m); err != nil {
		return err
	}
	if f.overDirtyLocked(0, 0) {
		f.writebackAsyncLocked()
		f.foldBackpressureLocked()
	}
	return nil
}

// Flush writes back every buffered write and commits it: when it returns
// nil the data is visible to handles opened afterwards, in any client, and
// survives a crash of this process; it is durable (survives a power loss)
// once a Sync returns (SyncFor). It returns a background write error once
// (f's own ErrMark).
func (f *File) Flush(ctx context.Context) error {
	return f.FlushFor(ctx, &f.mark)
}

// Sync is Flush, then Client.Sync: when it returns nil, the data and
// everything else this client committed before are durable (fsync).
func (f *File) Sync(ctx context.Context) error {
	return f.SyncFor(ctx, &f.mark)
}

// SyncFor is Sync for the descriptor whose ErrMark is m.
func (f *File) SyncFor(ctx context.Context, m *ErrMark) error {
	if err := f.FlushFor(ctx, m); err != nil {
		return err
	}
	return f.c.Sync(ctx)
}

// FlushFor is Flush for the descriptor whose ErrMark is m. Every
// descriptor flushes all of the File's buffered writes (they share them);
// each hears of a lost background write once. A failed writeback here keeps
// its stripes dirty, so the next flush tries them again.
func (f *File) FlushFor(ctx context.Context, m *ErrMark) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.waitLocked()
	err := f.writebackLocked(ctx)
	f.waitLocked()
	if lost := f.wb.errSince(m); lost != nil {
		return lost
	}
	return err
}

// writebackLocked writes every dirty stripe back and commits it, in the
// calling goroutine, after the background writes (waitLocked): a failure
// keeps the stripes dirty.
func (f *File) writebackLocked(ctx context.Context) error {
	f.waitLocked()
	if len(f.mu.dirty) == 0 {
		return nil
	}
	var todo []uint64
	for s := range f.mu.dirty {
		todo = append(todo, s)
	}
	sort.Slice(todo, func(i, j int) bool { return todo[i] < todo[j] })
	for attempt := 0; ; attempt++ {
		err := f.writeStripesLocked(ctx, todo, nil, attempt == 0)
		if err == nil {
			for _, s := range todo {
				f.unholdLocked(f.mu.dirty[s], true)
				f.mu.dirty[s].release()
				delete(f.mu.dirty, s)
			}
			return nil
		}
		if !errors.Is(err, meta.ErrConflict) || attempt >= 50 {
			return err
		}
		// Another writer committed some of these stripes first: merge
		// again on top of theirs. (Or truncated the file below bytes the
		// handle would log: with the size it has now, they merge.)
		if a, err := f.c.meta.Getattr(ctx, f.mu.attr.Ino); err == nil {
			f.mu.attr = a
		}
		time.Sleep(time.Duration(attempt+1) * time.Millisecond)
	}
}

// writeStripesLocked writes the given dirty stripes as new generations
// (merging the committed ones where the handle wrote only part) and commits
// them, a transaction per group of StripesInFlight stripes
// (merge_groups.go); stripes written in small part go to the delta log
// first, in a transaction of their own (logDeltasLocked).
//
// The stripe's new length is as far as the handle's view of the file
// reaches into it, or the committed length if that is longer (another
// writer extended the file), unless cutFrom is set (truncation: the
// records the cut stripes' bytes were read from; a stripe committed since
// is a conflict, so that a truncation never writes back bytes that
// another writer or a fold replaced).
//
// With guess, stripes that this handle knows were never committed (beyond
// the size at open, not committed by it: genGuessLocked) are not looked
// up: a new small file's flush asks the metadata service once, to commit.
// A wrong guess fails the commit with a conflict, and the caller tries
// again without guessing.
func (f *File) writeStripesLocked(ctx context.Context, todo []uint64, cutFrom map[uint64]meta.StripeRec, guess bool) error {
	lay := f.mu.attr.Layout
	sb := f.stripeBytes()
	ino := f.mu.attr.Ino
	cut := cutFrom != nil
	cur := map[uint64]meta.StripeRec{}
	if !guess || !f.uncommittedLocked(todo) {
		var err error
		if cur, err = f.c.stripeRecords(ctx, ino, todo); err != nil {
			return err
		}
	}
	for s, from := range cutFrom {
		if !sameVersion(cur[s], from) {
			return fmt.Errorf("truncate %s: stripe %d changed since it was read: %w", f.name, s, meta.ErrConflict)
		}
	}
	// Stripes written in small part over a committed generation go to
	// the delta log (delta.go); unless a full write of the stripe is still
	// in flight, whose commit would replace the extents.
	var logged, rest []uint64
	logOK := f.logOKLocked()
	for _, s := range todo {
		if old, had := cur[s]; had && !cut && logOK && f.mu.inflight[s] == nil && f.deltaOKLocked(f.mu.dirty[s], old) {
			logged = append(logged, s)
		} else {
			rest = append(rest, s)
		}
	}
	if len(logged) > 0 {
		if err := f.logDeltasLocked(ctx, logged, cur); errors.Is(err, ErrPoolFull) {
			// No room for the log stripes: the stripes are written as
			// new generations of the same length, which need none.
			rest = append(rest, logged...)
			slices.Sort(rest)
		} else if err != nil {
			return err
		}
	}
	if todo = rest; len(todo) == 0 {
		return nil
	}
	// In groups (mergeGroups), each committed before the next is written.
	for group := range mergeGroups(todo, f.c.opts.StripesInFlight) {
		commits, err := f.writeStripesEach(ctx, lay, ino, "write", group, func(ctx context.Context, s uint64, b *stripeBuf) (meta.StripeCommit, error) {
			old, had := cur[s]
			d := f.mu.dirty[s]
			// The stripe's length: as far as the file reaches into it.
			l := int(min(sb, f.mu.size-int64(s)*sb))
			if had && !cut {
				// Never cut what another writer committed beyond our view.
				l = max(l, int(old.Len))
			}
			return f.mergeOne(ctx, lay, ino, s, d, old, had, l, b)
		})
		if err != nil {
			return err
		}
		if err := f.c.withRoom(ctx, func() error { return f.commitLocked(ctx, commits, groupSize(todo, group, sb, f.mu.size)) }); err != nil {
			f.c.discard(ctx, f.mu.attr.Ino, commits)
			return err
		}
		for _, cm := range commits {
			f.mu.gens[cm.Rec.Stripe] = cm.Rec.Gen
			delete(f.mu.recs, cm.Rec.Stripe)
			f.mu.fold.set(cm.Rec.Stripe, 0, 0) // its extents are gone
		}
	}
	for _, s := range todo {
		f.mu.cache.drop(s)
	}
	return nil
}

// uncommittedLocked reports whether f knows that none of the stripes was
// ever committed.
func (f *File) uncommittedLocked(todo []uint64) bool {
	for _, s := range todo {
		if g, known := f.genGuessLocked(s); !known || g != 0 {
			return false
		}
	}
	return true
}

// commitLocked commits stripe generations and size (at most the
// handle's).
func (f *File) commitLocked(ctx context.Context, commits []meta.StripeCommit, size int64) error {
	mtime := f.mu.mtime
	if mtime == 0 {
		mtime = time.Now().UnixNano()
	}
	a, err := f.c.meta.CommitStripes(ctx, f.mu.attr.Ino, commits, uint64(size), mtime)
	if err != nil {
		if errors.Is(err, meta.ErrPoolFull) {
			err = fmt.Errorf("%w: %v", ErrPoolFull, err)
		}
		return fmt.Errorf("commit %s: %w", f.name, err)
	}
	f.mu.attr = a
	if int64(a.Size) > f.mu.size {
		f.mu.size = int64(a.Size)
	}
	return nil
}

// discard deletes the fragments of generations of file ino that were not
// committed.
func (c *Client) discard(ctx context.Context, ino meta.Ino, commits []meta.StripeCommit) {
	m, err := c.Map(ctx)
	if err != nil {
		return
	}
	for _, cm := range commits {
		if cm.Rec.Gen != 0 {
			c.deleteFragments(m, ino, cm.Rec, make([]error, len(cm.Rec.Drives)))
		}
	}
}

// joinInto copies the first l user bytes of data shards into dst.
func joinInto(dst []byte, shards [][]byte, l int) {
	off := 0
	for _, sh := range shards {
		if off >= l || off >= len(dst) {
			return
		}
		n := copy(dst[off:min(l, len(dst))], sh)
		off += n
	}
}

// fillShards lays the first l user bytes of a stripe out in b's data
// shards for the full-unit layout: flat's, then zeros up to l (flat may
// be shorter). writeStripe re-lays them out for a short stripe and zeroes
// every shard's tail beyond l (stripeBuf.relayout), so nothing past l is
// written here: a small file's flush must not clear a whole stripe.
func fillShards(b *stripeBuf, flat []byte, l, k, unit int) {
	for i := 0; i < k; i++ {
		lo := i * unit
		if lo >= l {
			return
		}
		sh := b.shard(i, unit)[:min(unit, l-lo)]
		n := 0
		if lo < len(flat) {
			n = copy(sh, flat[lo:])
		}
		clear(sh[n:])
	}
}

// sameVersion reports whether records a and b are the same version of a
// stripe: the same generation with the same extents over it.
func sameVersion(a, b meta.StripeRec) bool {
	return a.Gen == b.Gen && a.DeltaSum().LastSeq == b.DeltaSum().LastSeq && a.DeltaSum().Extents == b.DeltaSum().Extents
}

// cutLastStripeLocked rewrites the stripe that holds offset size with
// only its bytes before size, for a truncation to size (not a multiple
// of the stripe).
func (f *File) cutLastStripeLocked(ctx context.Context, size int64) error {
	sb := f.stripeBytes()
	s := uint64(size / sb)
	// The bytes are cut from the version of the stripe read here; a
	// commit of the stripe since is a conflict (writeStripesLocked), so
	// that a truncation never writes back bytes another writer replaced.
	recs, err := f.recordsLocked(ctx, s, s)
	if err != nil {
		return err
	}
	from := recs[s]
	d := &dirtyStripe{}
	f.mu.dirty[s] = d
	defer delete(f.mu.dirty, s)
	keep := int(size % sb)
	buf := make([]byte, keep)
	n, err := f.readLocked(ctx, buf, int64(s)*sb)
	if err != nil && err != io.EOF {
		return err
	}
	if recs, err := f.recordsLocked(ctx, s, s); err != nil {
		return err
	} else if !sameVersion(recs[s], from) {
		return fmt.Errorf("truncate %s: stripe %d changed while it was read: %w", f.name, s, meta.ErrConflict)
	}
	d.write(0, buf[:n])
	if n < keep {
		d.write(n, make([]byte, keep-n))
	}
	saved := f.mu.size
	f.mu.size = size
	if err := f.writeStripesLocked(ctx, []uint64{s}, map[uint64]meta.StripeRec{s: from}, false); err != nil {
		f.mu.size = saved
		return err
	}
	return nil
}

// Truncate sets the file's size. Shrinking rewrites the stripe the new end
// falls in, so bytes beyond it can never reappear; a fold or another
// writer that commits that stripe meanwhile makes it read and cut again.
func (f *File) Truncate(ctx context.Context, size int64) error {
	if size < 0 {
		return fmt.Errorf("%w: negative size", meta.ErrInvalid)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.waitLocked()
	if err := f.writebackLocked(ctx); err != nil {
		return err
	}
	sb := f.stripeBytes()
	if size < f.mu.size && size%sb != 0 {
		for attempt := 0; ; attempt++ {
			err := f.cutLastStripeLocked(ctx, size)
			if err == nil {
				break
			}
			if !errors.Is(err, meta.ErrConflict) || attempt >= 50 {
				return err
			}
			// A fold (or another writer) committed the stripe since it
			// was read: read it again, and cut that.
			f.forgetStripesLocked()
			time.Sleep(time.Duration(attempt+1) * time.Millisecond)
		}
	}
	a, err := f.c.meta.Setattr(ctx, f.mu.attr.Ino, meta.SetAttr{Valid: meta.SetSize, Size: uint64(size)})
	if err != nil {
		return err
	}
	f.mu.attr = a
	f.mu.size = size
	f.mu.cache.clear()
	// Stripes beyond the new size are gone: forget what was known of them.
	clear(f.mu.recs)
	for st := range f.mu.gens {
		if int64(st)*sb >= size {
			delete(f.mu.gens, st)
		}
	}
	return nil
}
