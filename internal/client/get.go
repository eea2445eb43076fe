package client

import (
	"context"
	"fmt"
	"io"

	"poolfs/internal/meta"
)

// GetOptions tune one Get.
type GetOptions struct {
	// Progress, if set, is called with the user bytes delivered so far.
	Progress func(done int64)
}

// Get writes the content of file p to w, reading stripes ahead in parallel.
// Holes (stripes never written) read as zeros.
func (c *Client) Get(ctx context.Context, p string, w io.Writer, o GetOptions) (meta.Attr, error) {
	a, err := c.Resolve(ctx, p)
	if err != nil {
		return a, err
	}
	if a.Type != meta.TypeFile {
		return a, fmt.Errorf("get %s: %w", p, meta.ErrIsDir)
	}
	return a, c.readStream(ctx, a, w, p, o.Progress)
}

type stripeResult struct {
	b      *stripeBuf
	shards [][]byte
	n      int64 // user bytes of this stripe to deliver
	err    error
}

// readStream delivers a file's bytes in order with up to
// 2×StripesInFlight stripes read ahead.
func (c *Client) readStream(ctx context.Context, a meta.Attr, w io.Writer, name string, progress func(int64)) error {
	lay := a.Layout
	if a.Size == 0 {
		return nil
	}
	if lay.K < 1 || lay.Unit == 0 {
		return fmt.Errorf("%w: file %s has no layout", meta.ErrInvalid, name)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sb := StripeBytes(lay)
	nstripes := (int64(a.Size) + sb - 1) / sb
	recs, err := c.meta.Stripes(ctx, a.Ino, 0, uint64(nstripes-1))
	if err != nil {
		return fmt.Errorf("get %s: stripes: %w", name, err)
	}
	byNo := make(map[uint64]meta.StripeRec, len(recs))
	for _, r := range recs {
		byNo[r.Stripe] = r
	}
	pool := c.bufs.get(lay.K+lay.M, int(lay.Unit))
	ahead := 2 * c.opts.StripesInFlight
	futures := make(chan chan stripeResult, ahead)
	go func() {
		defer close(futures)
		for s := int64(0); s < nstripes; s++ {
			n := min(sb, int64(a.Size)-s*sb)
			ch := make(chan stripeResult, 1)
			select {
			case futures <- ch:
			case <-ctx.Done():
				return
			}
			rec, ok := byNo[uint64(s)]
			if !ok {
				ch <- stripeResult{n: n} // hole
				continue
			}
			go func() {
				b := pool.get()
				shards, err := c.readStripe(ctx, lay, a.Ino, rec, b, name)
				ch <- stripeResult{b: b, shards: shards, n: n, err: err}
			}()
		}
	}()
	var done int64
	var firstErr error
	for ch := range futures {
		r := <-ch
		if firstErr == nil {
			if r.err != nil {
				firstErr = r.err
				cancel()
			} else if err := deliver(w, r); err != nil {
				firstErr = err
				cancel()
			} else {
				done += r.n
				if progress != nil {
					progress(done)
				}
			}
		}
		if r.b != nil {
			pool.put(r.b)
		}
	}
	return firstErr
}

var zeros = make([]byte, 1<<20)

// deliver writes the first n user bytes of a stripe (zeros for a hole).
func deliver(w io.Writer, r stripeResult) error {
	left := r.n
	for _, sh := range r.shards {
		if left <= 0 {
			break
		}
		k := min(left, int64(len(sh)))
		if _, err := w.Write(sh[:k]); err != nil {
			return err
		}
		left -= k
	}
	// A hole, or the zeros past a short stripe's data (a file grown by
	// truncate).
	for left > 0 {
		k, err := w.Write(zeros[:min(left, int64(len(zeros)))])
		if err != nil {
			return err
		}
		left -= int64(k)
	}
	return nil
}
