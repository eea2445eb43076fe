package client

import (
	"context"
	"fmt"
	"io"
	"sync"

	"poolfs/internal/clustermap"
	"poolfs/internal/erasure"
	"poolfs/internal/meta"
	"poolfs/internal/placement"
)

// ReadAt reads len(p) bytes at off. At the end of the file it returns the
// bytes there are and io.EOF. The handle's own unflushed writes are seen.
func (f *File) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("%w: negative offset", meta.ErrInvalid)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.readLocked(ctx, p, off)
}

func (f *File) readLocked(ctx context.Context, p []byte, off int64) (int, error) {
	if off >= f.mu.size {
		return 0, io.EOF
	}
	want := len(p)
	n := int(min(int64(want), f.mu.size-off))
	p = p[:n]
	sequential := off == f.mu.next
	if sequential {
		f.mu.seqs++
	} else {
		f.mu.seqs = 0
	}
	f.mu.next = off + int64(n)
	sb := f.stripeBytes()
	first, last := uint64(off/sb), uint64((off+int64(n)-1)/sb)
	byNo, err := f.recordsLocked(ctx, first, last)
	if err != nil {
		return 0, err
	}
	whole := f.mu.seqs >= 2 || n >= int(sb)/2
	for done := 0; done < n; {
		pos := off + int64(done)
		s := uint64(pos / sb)
		in := int(pos % sb)
		k := min(n-done, int(sb)-in)
		dst := p[done : done+k]
		rec, ok := byNo[s]
		switch {
		case !ok || rec.Gen == 0:
			clear(dst)
		case whole:
			data, err := f.wholeStripe(ctx, rec)
			if err != nil {
				return done, err
			}
			m := 0
			if in < len(data) {
				m = copy(dst, data[in:])
			}
			clear(dst[m:])
		default:
			if err := f.readRange(ctx, rec, in, dst); err != nil {
				return done, err
			}
		}
		if fl := f.mu.inflight[s]; fl != nil {
			overlay(dst, fl.d, in)
		}
		if d := f.mu.dirty[s]; d != nil {
			overlay(dst, d, in)
		}
		done += k
	}
	if whole && sequential {
		f.readAhead(last+1, sb)
	}
	if n < want {
		return n, io.EOF
	}
	return n, nil
}

// wholeStripe returns the user bytes of a committed stripe from the cache,
// reading the whole stripe if needed.
func (f *File) wholeStripe(ctx context.Context, rec meta.StripeRec) ([]byte, error) {
	e := f.mu.cache.get(rec.Stripe, rec.Gen)
	if e == nil {
		e = f.mu.cache.start(rec.Stripe, rec.Gen)
		f.c.fillEntry(ctx, e, rec, f.mu.attr.Layout, f.mu.attr.Ino, f.name)
	}
	<-e.ready
	if e.err != nil {
		f.mu.cache.drop(rec.Stripe)
		return nil, e.err
	}
	return e.data, nil
}

func (c *Client) fillEntry(ctx context.Context, e *cacheEntry, rec meta.StripeRec, lay meta.Layout, ino meta.Ino, name string) {
	pool := c.bufs.get(lay.K+lay.M, int(lay.Unit))
	b := pool.get()
	shards, err := c.readStripe(ctx, lay, ino, rec, b, name)
	if err == nil {
		e.data = erasure.Join(make([]byte, 0, rec.Len), shards, len(shards), int(rec.Len))
	}
	pool.put(b)
	e.err = err
	close(e.ready)
}

// readAhead starts reading the next stripes in the background.
func (f *File) readAhead(from uint64, sb int64) {
	last := (f.mu.size - 1) / sb
	for s := from; s < from+uint64(f.c.opts.StripesInFlight) && int64(s) <= last; s++ {
		if f.mu.cache.has(s) {
			continue
		}
		ctx := context.Background()
		recs, err := f.recordsLocked(ctx, s, s)
		if err != nil || recs[s].Gen == 0 {
			return
		}
		e := f.mu.cache.start(s, recs[s].Gen)
		go f.c.fillEntry(ctx, e, recs[s], f.mu.attr.Layout, f.mu.attr.Ino, f.name)
	}
}

// readRange reads bytes [in, in+len(dst)) of a committed stripe by reading
// only the blocks of the data fragments that hold them, checking their
// checksums; on any failure it falls back to a whole-stripe (degraded,
// repairing) read.
func (f *File) readRange(ctx context.Context, rec meta.StripeRec, in int, dst []byte) error {
	s := int(rec.ShardSize)
	end := in + len(dst)
	if in >= int(rec.Len) {
		clear(dst)
		return nil
	}
	m, err := f.c.Map(ctx)
	if err != nil {
		return err
	}
	type part struct{ idx, off, n, at int }
	var parts []part
	for pos := in; pos < min(end, int(rec.Len)); {
		idx, o := pos/s, pos%s
		n := min(s-o, min(end, int(rec.Len))-pos)
		parts = append(parts, part{idx, o, n, pos - in})
		pos += n
	}
	clear(dst)
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for i, pt := range parts {
		wg.Add(1)
		go func(i int, pt part) {
			defer wg.Done()
			errs[i] = f.c.readShardRange(ctx, m, f.mu.attr.Ino, rec, pt.idx, pt.off, dst[pt.at:pt.at+pt.n])
		}(i, pt)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			data, err := f.wholeStripe(ctx, rec)
			if err != nil {
				return err
			}
			clear(dst)
			if in < len(data) {
				copy(dst, data[in:])
			}
			return nil
		}
	}
	return nil
}

// readShardRange reads shard bytes [off, off+len(dst)) of fragment idx,
// verifying the blocks that hold them.
func (c *Client) readShardRange(ctx context.Context, mp *clustermap.Map, ino meta.Ino, rec meta.StripeRec, idx, off int, dst []byte) error {
	id := placement.DriveID(rec.Drives[idx])
	d, err := c.drives.Drive(mp, id)
	if err != nil {
		return err
	}
	key := erasure.FragmentKey{Ino: uint64(ino), Stripe: rec.Stripe, Gen: rec.Gen, Index: uint8(idx)}
	h, err := c.header(ctx, d, key, int(rec.ShardSize))
	if err != nil {
		return err
	}
	a, b := h.BlockExtent(off, len(dst))
	hs := erasure.HeaderSize(int(rec.ShardSize))
	lo := a &^ (erasure.Align - 1)
	hi := (b + erasure.Align - 1) &^ (erasure.Align - 1)
	buf, err := d.ReadFragment(ctx, key, int64(hs+lo), int64(hi-lo), nil)
	if err != nil {
		return err
	}
	if len(buf) < b-lo {
		return fmt.Errorf("%w: short read of %v", erasure.ErrCorrupt, key)
	}
	if bad := h.VerifyData(buf[a-lo:b-lo], a); len(bad) > 0 {
		return &erasure.ChecksumError{Key: key, Blocks: bad}
	}
	copy(dst, buf[off-lo:])
	return nil
}

// overlay copies the bytes d holds over dst, which holds stripe bytes
// [at, at+len(dst)).
func overlay(dst []byte, d *dirtyStripe, at int) {
	for _, sp := range d.spans {
		a, b := max(sp.a, at), min(sp.b, at+len(dst))
		if a < b {
			copy(dst[a-at:b-at], d.buf[a:b])
		}
	}
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
