package client

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"poolfs/internal/meta"
)

// writeStripesEach writes the stripes of todo, at most StripesInFlight at
// once: build fills a pooled stripe buffer for stripe s and writes it
// (Client.writeStripe) with the context it is given, whose fragment
// writes are deferred (sync.go), returning its commit. It returns the commits in
// todo's order; if any stripe failed, it discards the fragments of those
// written and returns the joined errors, wrapped with op and the file's
// name. lay and ino are f's (the caller may not hold f.mu).
func (f *File) writeStripesEach(ctx context.Context, lay meta.Layout, ino meta.Ino, op string, todo []uint64, build func(ctx context.Context, s uint64, b *stripeBuf) (meta.StripeCommit, error)) ([]meta.StripeCommit, error) {
	pool := f.c.bufs.get(lay.K+lay.M, int(lay.Unit))
	commits := make([]meta.StripeCommit, len(todo))
	errs := make([]error, len(todo))
	one := func(i int, s uint64) {
		b := pool.get()
		defer pool.put(b)
		if c, err := build(deferred(ctx), s, b); err != nil {
			errs[i] = err // commits[i] stays empty: nothing to discard
		} else {
			commits[i] = c
		}
	}
	if len(todo) == 1 {
		one(0, todo[0]) // a small file's flush: no goroutine to wake
	} else {
		sem := make(chan struct{}, f.c.opts.StripesInFlight)
		var wg sync.WaitGroup
		for i, s := range todo {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				one(i, s)
			}()
		}
		wg.Wait()
	}
	if err := errors.Join(errs...); err != nil {
		f.c.discard(ctx, ino, commits)
		return nil, fmt.Errorf("%s %s: %w", op, f.name, err)
	}
	return commits, nil
}
