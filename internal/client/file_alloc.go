package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"poolfs/internal/meta"
)

// Preallocate makes sure that the n bytes at off are stored (fallocate
// mode 0, or FALLOC_FL_KEEP_SIZE with keepSize): every stripe of the range
// that is a hole is written as a stripe of zeros and committed, so its
// capacity is taken from the pool now and a later write into it replaces
// a stripe of the same size (a commit that does not grow the pool's usage
// cannot fail with ErrPoolFull; the new generation's fragments, which need
// room on the drives until the old ones are collected, are admitted past
// a full drive's client write limit as replacements). A stored stripe that ends before the
// range's end, within the file, is rewritten to reach it. Without
// keepSize the file grows to off+n if it is shorter. The data the file
// holds does not change. Buffered writes are flushed first.
//
// Stripes are committed in batches; a failure (ErrPoolFull when the pool
// cannot hold the range) leaves the batches before it allocated, as
// local file systems leave what they allocated before ENOSPC.
func (f *File) Preallocate(ctx context.Context, off, n int64, keepSize bool) error {
	return f.changeRange(ctx, "preallocate", off, n, func(end int64) error {
		return f.preallocRangeLocked(ctx, off, end, keepSize)
	})
}

// changeRange runs fn, a change of the stripe map over [off, off+n), with
// f.mu held, after the writes in flight and the buffered ones are
// committed; afterwards f forgets the stripes it knew (fn changed them
// other than by writes). op names the change in the error for a bad range.
func (f *File) changeRange(ctx context.Context, op string, off, n int64, fn func(end int64) error) error {
	if off < 0 || n <= 0 {
		return fmt.Errorf("%w: %s %d bytes at %d", meta.ErrInvalid, op, n, off)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.waitLocked()
	if err := f.writebackLocked(ctx); err != nil {
		return err
	}
	defer f.forgetStripesLocked()
	return fn(off + n)
}

// preallocRangeLocked is Preallocate after the flush: it sets the size
// back to what was committed if the allocation fails part way.
func (f *File) preallocRangeLocked(ctx context.Context, off, end int64, keepSize bool) error {
	saved := f.mu.size
	if !keepSize && end > f.mu.size {
		f.mu.size = end
	}
	err := f.preallocLocked(ctx, off, end, keepSize)
	if err == nil && !keepSize && int64(f.mu.attr.Size) < f.mu.size {
		err = f.setSizeLocked(ctx, f.mu.size)
	}
	if err != nil {
		// The size is what was committed: the batches allocated.
		f.mu.size = max(saved, int64(f.mu.attr.Size))
	}
	return err
}

// preallocLocked is Preallocate of [off, end) after the flush, in batches.
func (f *File) preallocLocked(ctx context.Context, off, end int64, keepSize bool) error {
	sb := f.stripeBytes()
	first, last := uint64(off/sb), uint64((end-1)/sb)
	if err := f.checkRoomLocked(ctx, first, last); err != nil {
		return err
	}
	batch := uint64(4 * f.c.opts.StripesInFlight)
	for s := first; s <= last; s += batch {
		if err := f.preallocBatchLocked(ctx, s, min(last, s+batch-1), end, keepSize); err != nil {
			return err
		}
	}
	return f.writebackLocked(ctx)
}

// checkRoomLocked fails with ErrPoolFull, before anything is written,
// when the holes among stripes first..last, stored whole, would not fit
// in the pool's limit as it is now (commits check again, exactly).
func (f *File) checkRoomLocked(ctx context.Context, first, last uint64) error {
	lay := f.mu.attr.Layout
	used, limit, err := f.c.meta.PoolUsage(ctx, lay.Pool)
	if err != nil || limit == 0 {
		return err
	}
	recs, err := f.c.meta.Stripes(ctx, f.mu.attr.Ino, first, last)
	if err != nil {
		return err
	}
	holes := last - first + 1 - uint64(len(recs))
	need := holes * uint64(lay.Width()) * uint64(lay.Unit)
	if holes > (1<<62)/max(uint64(lay.Width())*uint64(lay.Unit), 1) || used+need > limit {
		return fmt.Errorf("preallocate %s: %w: %d stripes need %d raw bytes, pool has %d of %d used",
			f.name, ErrPoolFull, holes, need, used, limit)
	}
	return nil
}

// preallocBatchLocked preallocates stripes first..last of a range ending
// at end: holes become committed stripes of zeros, stored stripes too
// short for the range are extended by a buffered write of zeros.
func (f *File) preallocBatchLocked(ctx context.Context, first, last uint64, end int64, keepSize bool) error {
	sb := f.stripeBytes()
	for attempt := 0; ; attempt++ {
		recs, err := f.c.meta.Stripes(ctx, f.mu.attr.Ino, first, last)
		if err != nil {
			return err
		}
		stored := make(map[uint64]meta.StripeRec, len(recs))
		for _, r := range recs {
			stored[r.Stripe] = r
		}
		var holes []uint64
		lens := map[uint64]int{}
		for s := first; s <= last; s++ {
			base := int64(s) * sb
			// The stripe's length: as far as the file or the range reaches.
			want := min(sb, max(end, f.mu.size)-base)
			r, ok := stored[s]
			switch {
			case !ok:
				holes = append(holes, s)
				lens[s] = int(want)
			case int64(r.Len) < want && base+int64(r.Len) < f.mu.size:
				// Bytes past Len read as zeros: writing zeros there
				// changes no data and stores the stripe's full length.
				if err := f.zeroLocked(ctx, base+int64(r.Len), min(base+want, f.mu.size)); err != nil {
					return err
				}
			}
		}
		if len(holes) == 0 {
			return nil
		}
		size := uint64(0) // commits never shrink the size: with keepSize it stays
		if !keepSize {
			size = uint64(min(f.mu.size, int64(last+1)*sb)) // as far as allocated
		}
		err = f.commitZeroStripesLocked(ctx, holes, lens, size)
		if !errors.Is(err, meta.ErrConflict) || attempt >= 50 {
			return err
		}
		// Another writer stored some of these stripes first: they are
		// allocated now; look again.
		time.Sleep(time.Duration(attempt+1) * time.Millisecond)
	}
}

// commitZeroStripesLocked writes stripes of zeros (lens: user bytes of
// each) where todo are holes, and commits them in one transaction, each
// expecting no stripe; the size grows to size if it is shorter.
func (f *File) commitZeroStripesLocked(ctx context.Context, todo []uint64, lens map[uint64]int, size uint64) error {
	lay := f.mu.attr.Layout
	ino := f.mu.attr.Ino
	commits, err := f.writeStripesEach(ctx, lay, ino, "preallocate", todo, func(ctx context.Context, s uint64, b *stripeBuf) (meta.StripeCommit, error) {
		fillShards(b, nil, lens[s], lay.K, int(lay.Unit))
		rec, err := f.c.writeStripe(ctx, lay, ino, s, 0, b, lens[s])
		return meta.StripeCommit{Rec: rec}, err
	})
	if err != nil {
		return err
	}
	a, err := f.c.meta.CommitStripes(ctx, ino, commits, size, time.Now().UnixNano())
	if err != nil {
		f.c.discard(ctx, f.mu.attr.Ino, commits)
		if errors.Is(err, meta.ErrPoolFull) {
			err = fmt.Errorf("%w: %v", ErrPoolFull, err)
		}
		return fmt.Errorf("preallocate %s: %w", f.name, err)
	}
	f.mu.attr = a
	for _, cm := range commits {
		f.mu.gens[cm.Rec.Stripe] = cm.Rec.Gen
	}
	return nil
}

// ZeroRange makes the n bytes at off read as zeros and frees what they
// took (FALLOC_FL_PUNCH_HOLE, FALLOC_FL_ZERO_RANGE): the stripes wholly
// inside the range are dropped (holes), the at most two it covers in part
// are rewritten as new generations with zeros there (stripes that are
// holes stay holes). Without keepSize the file grows to off+n if it is
// shorter (ZERO_RANGE); with it the size stays and stripes beyond the end
// (preallocated) are dropped too. Buffered writes are flushed first.
func (f *File) ZeroRange(ctx context.Context, off, n int64, keepSize bool) error {
	return f.changeRange(ctx, "zero", off, n, func(end int64) error {
		return f.zeroRangeLocked(ctx, off, end, keepSize)
	})
}

// zeroRangeLocked is ZeroRange of [off, end) after the flush.
func (f *File) zeroRangeLocked(ctx context.Context, off, end int64, keepSize bool) error {
	sb := f.stripeBytes()
	first, last := (off+sb-1)/sb, end/sb-1 // stripes wholly inside
	if first <= last {
		a, err := f.c.meta.DropStripes(ctx, f.mu.attr.Ino, uint64(first), uint64(last))
		if err != nil {
			return fmt.Errorf("zero range of %s: %w", f.name, err)
		}
		f.mu.attr = a
		for s := first; s <= last; s++ {
			delete(f.mu.gens, uint64(s))
		}
	}
	// The parts in stripes covered in part, within the file; a stripe
	// that is a hole reads as zeros already.
	if lo, hi := off, min(end, f.mu.size); lo < hi {
		recs, err := f.c.meta.Stripes(ctx, f.mu.attr.Ino, uint64(lo/sb), uint64((hi-1)/sb))
		if err != nil {
			return err
		}
		stored := make(map[uint64]bool, len(recs))
		for _, r := range recs {
			stored[r.Stripe] = true
		}
		for pc := range pieces(lo, int(hi-lo), sb) {
			if stored[pc.s] && pc.n < int(sb) {
				base := int64(pc.s) * sb
				if err := f.zeroLocked(ctx, base+int64(pc.in), base+int64(pc.in+pc.n)); err != nil {
					return err
				}
			}
		}
	}
	if err := f.writebackLocked(ctx); err != nil {
		return err
	}
	if !keepSize && end > f.mu.size {
		return f.setSizeLocked(ctx, end)
	}
	return nil
}

// zeroLocked buffers zeros over [lo, hi).
func (f *File) zeroLocked(ctx context.Context, lo, hi int64) error {
	_, err := f.writeLocked(ctx, &f.mark, make([]byte, hi-lo), lo, true)
	return err
}

// setSizeLocked grows the committed size to size (a hole to the end).
func (f *File) setSizeLocked(ctx context.Context, size int64) error {
	a, err := f.c.meta.Setattr(ctx, f.mu.attr.Ino, meta.SetAttr{Valid: meta.SetSize, Size: uint64(size)})
	if err != nil {
		return err
	}
	f.mu.attr = a
	f.mu.size = size
	return nil
}

// forgetStripesLocked drops what f knew of its committed stripes (records
// and cached data) after a change of the stripe map not made by writes.
func (f *File) forgetStripesLocked() {
	clear(f.mu.recs)
	f.mu.cache.clear()
}
