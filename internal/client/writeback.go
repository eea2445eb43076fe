package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"poolfs/internal/meta"
)

// Write-back in the background (docs/small-writes.md, "Writing").
//
// When a write passes the File's limit of dirty bytes (overDirtyLocked),
// the File's dirty stripes leave f.mu.dirty as one batch, which a
// goroutine writes back while the writer goes on: the stripes written in
// small part over a committed generation go to the delta log, the others
// are merged into new generations. At most batchesInFlight batches of a
// File run at once; a writer that would start one more waits for one to
// end.
//
// Until its commit lands a batch's bytes stay readable through the File:
// a read of a stripe that a batch (or a full stripe in flight) holds is
// done with the mutex held and lays the bytes over the committed ones in
// the order they were handed to the background (seq), then the dirty
// ones.
//
// Order: the commits that change one stripe land in the order their
// bytes were handed to the background. A batch writes its log stripes
// at once (their bytes do not depend on what is committed), then waits
// for the earlier background writes of its stripes (after), and only
// then reads the stripes' records and commits its extents over them
// (compare-and-set; a fold that committed since makes it read the
// records again and commit the same log stripes over the new
// generations). A full stripe handed to the background waits in the same
// way before its commit (startLocked).
//
// Nothing of a batch is visible before its commits, and its log stripes'
// fragments are written before the commit that names them: a crash
// leaves the stripes as they were, and the fragments as orphans for the
// collector. An error is the File's background write error (the bytes
// are lost; every descriptor hears of it once, as for full stripes).

// batchesInFlight is the most write-back batches a File runs at once.
const batchesInFlight = 4

// batch is dirty stripes handed to the background as one write-back.
type batch struct {
	seq   uint64                  // order among the File's background writes
	dirty map[uint64]*dirtyStripe // the stripes, removed from f.mu.dirty
	todo  []uint64                // their numbers, sorted
	// logged are the stripes that go to the delta log as far as the File
	// knew at hand-over (deltaGuessLocked); the records decide at commit.
	logged   []uint64
	logBytes int64           // their bytes, counted in f.mu.fold.pending until the batch ends
	after    []chan struct{} // earlier background writes of these stripes
	done     chan struct{}   // closed once the batch ended

	lay         meta.Layout
	ino         meta.Ino
	size, mtime int64 // the File's size and explicit mtime at hand-over
	committed   int64 // the size committed as far as the File knew at hand-over
}

// batchResult is what a batch committed, for the File to note.
type batchResult struct {
	attr    meta.Attr
	hasAttr bool
	cur     map[uint64]meta.StripeRec // records the extents went over
	deltaed []uint64                  // stripes written as extents
	logs    []*logBuf                 // their log stripes
	commits []meta.StripeCommit       // and the records written of those
	gens    map[uint64]uint64         // stripes written as new generations
}

// writebackAsyncLocked hands f's dirty stripes to the background as one
// batch. f.mu is held; it is released while waiting for a batch to end
// when batchesInFlight run.
func (f *File) writebackAsyncLocked() {
	for len(f.mu.batches) >= batchesInFlight {
		f.wb.idle.Wait()
	}
	if len(f.mu.dirty) == 0 {
		return // another writer took them meanwhile
	}
	f.mu.wseq++
	b := &batch{seq: f.mu.wseq, dirty: f.mu.dirty, done: make(chan struct{}),
		lay: f.mu.attr.Layout, ino: f.mu.attr.Ino, size: f.mu.size, mtime: f.mu.mtime, committed: int64(f.mu.attr.Size)}
	f.mu.dirty = map[uint64]*dirtyStripe{}
	f.mu.dirtyEst = 0
	for s := range b.dirty {
		b.todo = append(b.todo, s)
	}
	slices.Sort(b.todo)
	prev := map[chan struct{}]bool{}
	logOK := !f.c.opts.NoDeltas && f.logOKLocked()
	for _, s := range b.todo {
		if in := f.mu.inflight[s]; in != nil && !prev[in.done] {
			prev[in.done] = true
			b.after = append(b.after, in.done)
		}
		for i := len(f.mu.batches) - 1; i >= 0; i-- {
			if o := f.mu.batches[i]; o.dirty[s] != nil {
				if !prev[o.done] {
					prev[o.done] = true
					b.after = append(b.after, o.done)
				}
				break // o waits for the earlier ones
			}
		}
		if logOK && f.deltaGuessLocked(s, b.dirty[s]) {
			b.logged = append(b.logged, s)
			b.logBytes += int64(b.dirty[s].bytes())
		}
	}
	f.mu.fold.pending += b.logBytes
	f.mu.batches = append(f.mu.batches, b)
	f.wb.running++
	go f.runBatch(b)
}

// deltaGuessLocked reports whether dirty stripe d of stripe s will most
// likely go to the delta log (deltaFits over the record the File
// expects): it lies within the stripe's committed length as far as f
// knows it and holds less than half of it. (Whether its bytes with the
// stripe's extents are due for a fold is not guessed: what f knows of
// the extents at hand-over is older than the batches before this one,
// and a stripe merged on a stale count costs a stripe at a low cover; a
// stripe that the batch's extents make due is folded after the commit.)
func (f *File) deltaGuessLocked(s uint64, d *dirtyStripe) bool {
	sb := f.stripeBytes()
	l := min(sb, max(0, int64(f.mu.attr.Size)-int64(s)*sb))
	if r, ok := f.mu.recs[s]; ok {
		l = min(l, int64(r.Len))
		if r.Gen == 0 {
			l = 0
		}
	}
	return !f.c.opts.NoDeltas && l > 0 && int64(d.end()) <= l && 2*d.bytes() < int(sb)
}

// runBatch writes batch b back and notes the result in f.
func (f *File) runBatch(b *batch) {
	res, err := f.writeBatch(deferred(context.Background()), b)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil {
		f.wb.setErr(err)
		f.c.log.Warn("background write-back failed: the file's next write, flush or fsync reports it", "file", f.name, "stripes", len(b.todo), "err", err)
	} else {
		if res.hasAttr {
			f.mu.attr = res.attr
			f.mu.size = max(f.mu.size, int64(res.attr.Size))
		}
		for s, g := range res.gens {
			f.mu.gens[s] = g
			f.mu.fold.set(s, 0, 0) // its extents are gone
		}
		if len(res.deltaed) > 0 {
			f.noteDeltasLocked(res.deltaed, res.cur, res.logs, res.commits)
		}
	}
	for _, s := range b.todo {
		d := b.dirty[s]
		delete(f.mu.recs, s)
		f.mu.cache.drop(s)
		f.unholdLocked(d, err == nil)
		d.release()
	}
	f.mu.fold.pending -= b.logBytes
	f.mu.batches = slices.DeleteFunc(f.mu.batches, func(o *batch) bool { return o == b })
	close(b.done)
	f.wb.running--
	f.wb.idle.Broadcast() // waitLocked, and writers waiting for a batch slot
}

// writeBatch writes b's log stripes, waits for the earlier background
// writes of its stripes, and commits: the logged stripes' extents over
// the records as they are then, and the other stripes (and the logged
// ones whose record no longer takes extents) as new generations merged
// over the committed ones. It does not hold f.mu.
func (f *File) writeBatch(ctx context.Context, b *batch) (batchResult, error) {
	var res batchResult
	sb := StripeBytes(b.lay)
	logs := packDeltas(b.dirty, b.logged, int(sb))
	var commits []meta.StripeCommit
	logged := map[uint64]bool{}
	if len(logs) > 0 {
		var err error
		commits, err = f.writeLogs(ctx, b.lay, b.ino, logs)
		switch {
		case errors.Is(err, ErrPoolFull):
			// The drives have no room for the log stripes: the stripes
			// are merged into new generations instead, which replace
			// generations of the same length.
			logs, commits = nil, nil
		case err != nil:
			return res, err
		default:
			for _, s := range b.logged {
				logged[s] = true
			}
		}
	}
	for _, ch := range b.after {
		<-ch
	}
	var merged []uint64
	for attempt := 0; ; attempt++ {
		cur, err := f.c.stripeHeads(ctx, b.ino, b.todo)
		if err != nil {
			f.c.discard(ctx, b.ino, commits)
			return res, err
		}
		// The logged stripes whose record still takes their extents.
		// (once merged, always: its extents are left out of the logs).
		merged = merged[:0]
		for _, s := range b.todo {
			if !logged[s] || !f.deltaFits(b.dirty[s], cur[s], sb, b.committed) {
				logged[s] = false
				merged = append(merged, s)
			}
		}
		if len(logs) == 0 {
			res.cur = cur
			break
		}
		keepLogs, keepCommits, dropped := overRecords(logs, commits, cur, merged)
		f.c.discard(ctx, b.ino, dropped)
		logs, commits = keepLogs, keepCommits
		if len(logs) == 0 {
			res.cur = cur
			break
		}
		a, err := f.c.commitLogs(ctx, b.ino, f.name, logs, commits, b.mtime)
		if err == nil {
			res.attr, res.hasAttr, res.cur, res.logs, res.commits = a, true, cur, logs, commits
			break
		}
		if errors.Is(err, ErrPoolFull) {
			// The pool has no room for the log stripes: write the
			// stripes as new generations instead, which replace
			// generations of the same length and need none.
			f.c.discard(ctx, b.ino, commits)
			logs, commits = nil, nil
			clear(logged)
			continue
		}
		if !errors.Is(err, meta.ErrConflict) || attempt >= 50 {
			if !errors.Is(err, errStopped) {
				f.c.discard(ctx, b.ino, commits)
			}
			return res, err
		}
		// A fold (or another writer) committed a stripe since the
		// records were read: the same log stripes over the new ones.
		// (Or the size shrank below some extents: those merge.)
		if a, err := f.c.meta.Getattr(ctx, b.ino); err == nil {
			b.committed = int64(a.Size)
		}
		time.Sleep(time.Duration(attempt+1) * time.Millisecond)
	}
	for _, s := range b.logged {
		if logged[s] {
			res.deltaed = append(res.deltaed, s)
		}
	}
	if len(merged) == 0 {
		return res, nil
	}
	gens, a, err := f.mergeStripes(ctx, b, merged)
	if err != nil {
		return res, err
	}
	res.gens, res.attr, res.hasAttr = gens, a, true
	return res, nil
}

// overRecords sets the extents of logs over the records cur, leaving out
// those of the stripes merged (their bytes stay in the log stripe,
// unreferenced): it returns the log stripes that keep extents with their
// written records, and those of the ones left empty, to delete.
func overRecords(logs []*logBuf, commits []meta.StripeCommit, cur map[uint64]meta.StripeRec, merged []uint64) ([]*logBuf, []meta.StripeCommit, []meta.StripeCommit) {
	var keep []*logBuf
	var keepC, drop []meta.StripeCommit
	for i, lb := range logs {
		ds := lb.deltas[:0:0]
		for _, d := range lb.deltas {
			if _, found := slices.BinarySearch(merged, d.Stripe); found {
				continue
			}
			d.BaseGen = cur[d.Stripe].Gen
			ds = append(ds, d)
		}
		if len(ds) == 0 {
			drop = append(drop, commits[i])
			continue
		}
		keep = append(keep, &logBuf{n: lb.n, deltas: ds, src: lb.src})
		keepC = append(keepC, commits[i])
	}
	return keep, keepC, drop
}

// deltaFits reports whether dirty stripe d of a stripe of sb bytes can go
// to the delta log over committed record old, in a file whose committed
// size is size: old is a generation, d lies within its length and within
// the file's size, and holds less than half of it. (Extents change no
// size: a stripe preallocated beyond the end of the file has a length
// there, and bytes written into it grow the file, which a merge commits.)
func (f *File) deltaFits(d *dirtyStripe, old meta.StripeRec, sb, size int64) bool {
	inFile := size - int64(old.Stripe)*sb
	return !f.c.opts.NoDeltas && old.Gen != 0 && d.end() <= int(old.Len) && int64(d.end()) <= inFile && 2*d.bytes() < int(sb)
}

// mergeStripes writes stripes todo of b as new generations, each the
// committed stripe (its record read with its extents) with b's bytes laid
// over it, and commits them in one transaction; on a conflict (another
// writer or a fold committed a stripe since its record was read, or the
// collector took the generation a stale record named: errStale) it reads
// the records again and merges anew. It returns the generations committed.
func (f *File) mergeStripes(ctx context.Context, b *batch, todo []uint64) (map[uint64]uint64, meta.Attr, error) {
	gens := map[uint64]uint64{}
	var a meta.Attr
	// In groups, each committed before the next is written (merge_groups.go).
	for group := range mergeGroups(todo, f.c.opts.StripesInFlight) {
		for attempt := 0; ; attempt++ {
			var err error
			a, err = f.mergeOnce(ctx, b, group, groupSize(todo, group, StripeBytes(b.lay), b.size), gens)
			if err == nil {
				break
			}
			if !errors.Is(err, meta.ErrConflict) || attempt >= 50 {
				return gens, a, err
			}
			time.Sleep(time.Duration(attempt+1) * time.Millisecond)
		}
	}
	return gens, a, nil
}

// mergeOnce is one attempt of mergeStripes at one group, whose commit sets
// the file's size to size; it adds the generations it committed to gens.
func (f *File) mergeOnce(ctx context.Context, b *batch, todo []uint64, size int64, gens map[uint64]uint64) (meta.Attr, error) {
	sb := StripeBytes(b.lay)
	cur, err := f.c.stripeRecords(ctx, b.ino, todo)
	if err != nil {
		return meta.Attr{}, err
	}
	commits, err := f.writeStripesEach(ctx, b.lay, b.ino, "write", todo, func(ctx context.Context, s uint64, sbuf *stripeBuf) (meta.StripeCommit, error) {
		old, had := cur[s]
		l := int(min(sb, b.size-int64(s)*sb))
		if had {
			l = max(l, int(old.Len)) // never cut what is committed
		}
		return f.mergeOne(ctx, b.lay, b.ino, s, b.dirty[s], old, had, l, sbuf)
	})
	if err != nil {
		return meta.Attr{}, err
	}
	mtime := b.mtime
	if mtime == 0 {
		mtime = time.Now().UnixNano()
	}
	var a meta.Attr
	err = f.c.withRoom(ctx, func() (err error) {
		a, err = f.c.meta.CommitStripes(ctx, b.ino, commits, uint64(size), mtime)
		return err
	})
	if err != nil {
		f.c.discard(ctx, b.ino, commits)
		if errors.Is(err, meta.ErrPoolFull) {
			err = fmt.Errorf("%w: %v", ErrPoolFull, err)
		}
		return meta.Attr{}, fmt.Errorf("commit %s: %w", f.name, err)
	}
	for _, cm := range commits {
		gens[cm.Rec.Stripe] = cm.Rec.Gen
	}
	return a, nil
}

// mergeOne writes stripe s as a new generation of l bytes: the committed
// content of old (with its extents) if the handle did not write it whole,
// with d's bytes over it.
func (f *File) mergeOne(ctx context.Context, lay meta.Layout, ino meta.Ino, s uint64, d *dirtyStripe, old meta.StripeRec, had bool, l int, b *stripeBuf) (meta.StripeCommit, error) {
	if (!had || d.covers(l)) && l <= b.unit {
		// Nothing committed to read (a new file, or one the handle
		// wrote whole) and every byte in shard 0: no flat copy.
		d.stage(b, l)
		rec, err := f.c.writeStripe(ctx, lay, ino, s, old.Gen, b, l)
		return meta.StripeCommit{Rec: rec, OldGen: old.Gen, Deltas: meta.FoldAll}, err
	}
	flat := make([]byte, l)
	deltas := meta.FoldAll // written whole: replaces any extents
	if had && !d.covers(l) {
		shards, err := f.c.readStripeDeltas(ctx, lay, ino, old, b, f.name)
		if err != nil {
			return meta.StripeCommit{}, err
		}
		// Move the committed bytes into full-unit layout, then lay
		// this handle's ranges over them.
		joinInto(flat, shards, int(old.Len))
		deltas = maxDeltaSeq(old)
	}
	d.overlay(flat, 0)
	fillShards(b, flat, l, lay.K, int(lay.Unit))
	rec, err := f.c.writeStripe(ctx, lay, ino, s, old.Gen, b, l)
	return meta.StripeCommit{Rec: rec, OldGen: old.Gen, Deltas: deltas}, err
}
