package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"poolfs/internal/meta"
)

// writeBehind writes stripes that a handle filled completely in the
// background, so a sequential writer keeps stripes on the wire (its File's
// window of StripesInFlight, plus what it can borrow from the client's
// shared window) instead of stalling at each writeback. Until its commit, an
// in-flight stripe's bytes stay readable through the handle.
type writeBehind struct {
	// A stripe in the background holds a token of the File's own window
	// (StripesInFlight) or, when that is full, of the client's shared one.
	sem, shared chan struct{}
	// running counts the stripes in the background; idle (on the File's
	// mutex) is signalled when it drops to zero. (Not a WaitGroup: writers
	// of one File add to it while another descriptor's flush waits, which
	// a WaitGroup forbids.)
	running int // guarded by File.mu
	idle    *sync.Cond
	// The errors of background writes (whose data is lost) form a
	// sequence, as Linux's errseq_t does for a file's page cache: seq counts
	// them and err is the latest.
	mu struct {
		sync.Mutex
		seq uint64
		err error
	}
}

// An ErrMark is how far one descriptor has been told of its File's
// background write errors. Each descriptor that has the File open when an
// error happens hears of it once, at its next write, flush or fsync; a
// descriptor opened afterwards does not hear of it. Every access goes
// through writeBehind.mu, so a mark may be used from several goroutines.
type ErrMark struct{ seen uint64 }

type inflight struct {
	d    *dirtyStripe
	seq  uint64 // order among the File's background writes (writeback.go)
	done chan struct{}
}

func (w *writeBehind) setErr(err error) {
	w.mu.Lock()
	w.mu.seq++
	w.mu.err = err
	w.mu.Unlock()
}

// errSince returns the latest background write error if one happened
// since m last looked, and moves m past it.
func (w *writeBehind) errSince(m *ErrMark) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if m.seen == w.mu.seq {
		return nil
	}
	m.seen = w.mu.seq
	return w.mu.err
}

// Mark returns a mark for a new descriptor of f: it will hear of the
// background write errors that happen from now on.
func (f *File) Mark() *ErrMark {
	f.wb.mu.Lock()
	defer f.wb.mu.Unlock()
	return &ErrMark{seen: f.wb.mu.seq}
}

// startLocked hands full stripe s to the background. f.mu is held; it is
// released while waiting for a free slot (other writers and readers of the
// File go on meanwhile) or for an earlier write of the same stripe (so the
// later content always commits last). The stripe is in f.mu.inflight, and
// readable, from the moment it leaves f.mu.dirty.
func (f *File) startLocked(s uint64, d *dirtyStripe) {
	for prev := f.mu.inflight[s]; prev != nil; prev = f.mu.inflight[s] {
		f.mu.Unlock()
		<-prev.done
		f.mu.Lock()
	}
	f.mu.wseq++
	in := &inflight{d: d, seq: f.mu.wseq, done: make(chan struct{})}
	f.mu.inflight[s] = in
	// A batch still writing this stripe back commits first.
	var after chan struct{}
	for i := len(f.mu.batches) - 1; i >= 0; i-- {
		if f.mu.batches[i].dirty[s] != nil {
			after = f.mu.batches[i].done
			break
		}
	}
	f.wb.running++
	var tok chan struct{}
	select {
	case f.wb.sem <- struct{}{}:
		tok = f.wb.sem
	case f.wb.shared <- struct{}{}:
		tok = f.wb.shared
	default:
		f.mu.Unlock()
		select {
		case f.wb.sem <- struct{}{}:
			tok = f.wb.sem
		case f.wb.shared <- struct{}{}:
			tok = f.wb.shared
		}
		f.mu.Lock()
	}
	lay, ino, sb := f.mu.attr.Layout, f.mu.attr.Ino, f.stripeBytes()
	guess, known := f.genGuessLocked(s)
	go func() {
		// The slot is freed once the fragments are durable, before the
		// commit, so commit latency never idles the drives. It is freed
		// without f.mu: a writer may hold f.mu while it waits for a slot.
		var once sync.Once
		free := func() { once.Do(func() { <-tok }) }
		written := func() {
			free()
			if after != nil {
				<-after
			}
		}
		gen, err := f.c.writeFullStripe(deferred(context.Background()), lay, ino, s, d, f.name, guess, known, written)
		free()
		f.mu.Lock()
		if f.mu.inflight[s] == in {
			delete(f.mu.inflight, s)
		}
		f.unholdLocked(d, err == nil)
		d.release()
		if err != nil {
			f.c.log.Warn("background write of a stripe failed: the file's next write, flush or fsync reports it", "file", f.name, "stripe", s, "err", err)
			f.wb.setErr(err)
		} else {
			f.mu.gens[s] = gen
			delete(f.mu.recs, s)
		}
		if end := int64(s+1) * sb; err == nil && end > int64(f.mu.attr.Size) {
			f.mu.attr.Size = uint64(end)
		}
		f.mu.cache.drop(s)
		close(in.done)
		if f.wb.running--; f.wb.running == 0 {
			f.wb.idle.Broadcast()
		}
		f.mu.Unlock()
	}()
}

// waitLocked waits for every background write; f.mu is held and released
// while waiting.
func (f *File) waitLocked() {
	for f.wb.running > 0 {
		f.wb.idle.Wait()
	}
}

// writeStripeBuf buffers stripe s of f as the l bytes that the data shards
// of b hold (full-unit layout; b is a stripe buffer of f's geometry from
// the client's pool), as WriteAt of those bytes at the stripe's offset
// would, but without copying them: b becomes the dirty stripe's buffer,
// and f owns it from the call on, error or not. A stripe f already holds
// writes for, or a part of a stripe small enough to be buffered flat,
// takes the bytes by copy. This is how Put hands over the stripes it
// reads its source into.
func (f *File) writeStripeBuf(ctx context.Context, s uint64, b *stripeBuf, l int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	lay := f.mu.attr.Layout
	pool := f.c.bufs.get(lay.K+lay.M, int(lay.Unit))
	sb := f.stripeBytes()
	off := int64(s) * sb
	if f.mu.dirty[s] != nil || l < int(sb) && l <= smallDirty {
		flat := make([]byte, l)
		joinInto(flat, b.shards(int(lay.Unit))[:lay.K], l)
		pool.put(b)
		_, err := f.writeLocked(ctx, &f.mark, flat, off, true)
		return err
	}
	holds, err := f.admitLocked(ctx, l, off, true)
	if err != nil {
		pool.put(b)
		return err
	}
	d := &dirtyStripe{k: lay.K, unit: int(lay.Unit), pool: pool, sbuf: b, spans: []span{{0, l}}, held: holds[s]}
	f.mu.cache.drop(s)
	if d.covers(int(sb)) {
		f.startLocked(s, d)
	} else {
		f.mu.dirty[s] = d
	}
	return f.wroteLocked(ctx, &f.mark, off+int64(l))
}

// Discard drops f's buffered writes without writing them back: it waits for
// the stripes being written in the background (they may still commit) and
// gives back the buffers and pool space the dirty ones hold. For a writer
// that gives up on a file it is about to remove (Put after an error).
func (f *File) Discard() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.waitLocked()
	for s, d := range f.mu.dirty {
		f.unholdLocked(d, false)
		d.release()
		delete(f.mu.dirty, s)
	}
}

// genGuessLocked returns the generation stripe s most likely has now, and
// whether it is worth trusting: one this handle committed itself, or 0 for
// a stripe beyond the size the file had when it was opened. A wrong guess
// costs a conflict and a lookup, never correctness.
func (f *File) genGuessLocked(s uint64) (uint64, bool) {
	if g, ok := f.mu.gens[s]; ok {
		return g, true
	}
	if int64(s)*f.stripeBytes() >= f.mu.openSize {
		return 0, true
	}
	return 0, false
}

// writeFullStripe writes a stripe that d covers whole as new content and
// commits it over whatever generation is current: the content does not
// depend on the old one, so a conflict only means trying again on top of
// the newer one. It starts from the guessed generation when known, calls
// written once the fragments are durable, and returns the committed
// generation. The data shards are sent from d's stripe buffer (parity is
// computed into it) when d has one.
func (c *Client) writeFullStripe(ctx context.Context, lay meta.Layout, ino meta.Ino, s uint64, d *dirtyStripe, name string,
	guess uint64, known bool, written func()) (uint64, error) {
	l := int(StripeBytes(lay))
	b := d.sbuf
	if b == nil {
		pool := c.bufs.get(lay.K+lay.M, int(lay.Unit))
		b = pool.get()
		defer pool.put(b)
		flat := make([]byte, l)
		d.overlay(flat, 0)
		fillShards(b, flat, l, lay.K, int(lay.Unit))
	}
	old := guess
	for attempt := 0; attempt < 50; attempt++ {
		if !known {
			recs, err := c.meta.Stripes(ctx, ino, s, s)
			if err != nil {
				return 0, err
			}
			old = 0
			if len(recs) == 1 {
				old = recs[0].Gen
			}
		}
		known = false // after a conflict, look it up
		rec, err := c.writeStripe(ctx, lay, ino, s, old, b, l)
		if err != nil {
			return 0, fmt.Errorf("write %s: %w", name, err)
		}
		written()
		end := int64(s)*StripeBytes(lay) + int64(l)
		err = c.withRoom(ctx, func() error {
			_, err := c.meta.CommitStripes(ctx, ino, []meta.StripeCommit{{Rec: rec, OldGen: old, Deltas: meta.FoldAll}}, uint64(end), time.Now().UnixNano())
			return err
		})
		if err == nil {
			return rec.Gen, nil
		}
		m, _ := c.Map(ctx)
		c.deleteFragments(m, ino, rec, make([]error, len(rec.Drives)))
		if errors.Is(err, meta.ErrPoolFull) {
			return 0, fmt.Errorf("commit %s: %w: %v", name, ErrPoolFull, err)
		}
		if !errors.Is(err, meta.ErrConflict) && !errors.Is(err, meta.ErrInvalid) {
			return 0, fmt.Errorf("commit %s: %w", name, err)
		}
		if attempt > 0 {
			time.Sleep(time.Duration(attempt) * time.Millisecond)
		}
	}
	return 0, fmt.Errorf("commit %s stripe %d: %w (50 attempts)", name, s, meta.ErrConflict)
}
