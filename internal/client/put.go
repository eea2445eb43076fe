package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"poolfs/internal/meta"
)

// tmpPrefix names the hidden files Put writes before renaming them into
// place; the collector removes stale ones.
const tmpPrefix = ".poolfs-put."

func isExist(err error) bool { return errors.Is(err, meta.ErrExist) }

// PutOptions tune one Put.
type PutOptions struct {
	Mode uint32 // permission bits of a new file (default 0644)
	// Size, when known (>= 0), lets Put refuse a write that cannot fit
	// before sending anything. -1: unknown.
	Size int64
	// Progress, if set, is called with the user bytes written so far.
	Progress func(done int64)
}

// Put stores everything r yields as the file p, atomically: readers see the
// old content (or no file) until Put returns, then the new content. A p
// that is a directory is refused with meta.ErrIsDir before r is read.
func (c *Client) Put(ctx context.Context, p string, r io.Reader, o PutOptions) (meta.Attr, error) {
	if o.Mode == 0 {
		o.Mode = 0o644
	}
	dir, name, err := c.resolveParent(ctx, p)
	if err != nil {
		return meta.Attr{}, err
	}
	if a, err := c.meta.Lookup(ctx, dir.Ino, name); err == nil && a.Type == meta.TypeDir {
		return meta.Attr{}, fmt.Errorf("put %s: %w", p, meta.ErrIsDir) // refused before a byte is sent
	}
	lay := dir.Layout
	if err := c.checkSpace(ctx, lay, o.Size); err != nil {
		return meta.Attr{}, fmt.Errorf("put %s: %w", p, err)
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := tmpPrefix + hex.EncodeToString(rnd[:]) + "." + name
	if len(tmp) > 255 {
		tmp = tmp[:255]
	}
	f, err := c.meta.Create(ctx, dir.Ino, tmp, meta.TypeFile, o.Mode, 0, 0, 0, "")
	if err != nil {
		return meta.Attr{}, fmt.Errorf("put %s: %w", p, err)
	}
	cleanup := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = c.meta.Unlink(ctx, dir.Ino, tmp)
	}
	if _, err := c.writeStream(ctx, f, r, p, o.Progress); err != nil {
		cleanup()
		return meta.Attr{}, fmt.Errorf("put %s: %w", p, err)
	}
	if err := c.meta.Rename(ctx, dir.Ino, tmp, dir.Ino, name, 0); err != nil {
		cleanup()
		return meta.Attr{}, fmt.Errorf("put %s: %w", p, err)
	}
	if err := c.syncMeta(ctx); err != nil {
		return meta.Attr{}, fmt.Errorf("put %s: %w", p, err)
	}
	return c.meta.Getattr(ctx, f.Ino)
}

// checkSpace refuses a write of size user bytes that cannot fit in the pool.
func (c *Client) checkSpace(ctx context.Context, lay meta.Layout, size int64) error {
	if size < 0 {
		return nil
	}
	used, limit, err := c.meta.PoolUsage(ctx, lay.Pool)
	if err != nil {
		return err
	}
	need := uint64(size) / uint64(lay.K) * uint64(lay.K+lay.M)
	if limit > 0 && used+need > limit {
		return fmt.Errorf("%w: pool %d needs %d raw bytes, %d of %d used", ErrPoolFull, lay.Pool, need, used, limit)
	}
	return nil
}

// writeStream writes r into the new, empty file f stripe by stripe,
// several stripes in flight. A stripe's buffers are free again as soon as
// its fragments are durable; a committer batches the finished stripes into
// few metadata transactions, so commit latency never holds a stripe slot.
// It returns the bytes written.
func (c *Client) writeStream(ctx context.Context, f meta.Attr, r io.Reader, name string, progress func(int64)) (int64, error) {
	lay := f.Layout
	if lay.K < 1 || lay.Unit == 0 {
		return 0, fmt.Errorf("%w: file %s has no layout", meta.ErrInvalid, name)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pool := c.bufs.get(lay.K+lay.M, int(lay.Unit))
	sem := make(chan struct{}, c.opts.StripesInFlight)
	done := make(chan written, c.opts.StripesInFlight)
	var (
		wg       sync.WaitGroup
		errMu    sync.Mutex
		firstErr error
	)
	fail := func(err error) {
		errMu.Lock()
		if firstErr == nil {
			firstErr = err
			cancel()
		}
		errMu.Unlock()
	}
	committed := make(chan struct{})
	go func() {
		defer close(committed)
		c.commitLoop(ctx, f.Ino, done, fail, progress)
	}()
	unit := int(lay.Unit)
	var total int64
	for stripe := uint64(0); ; stripe++ {
		b := pool.get()
		l, rerr := readStripe(r, b, lay.K, unit)
		if rerr != nil {
			pool.put(b)
			fail(fmt.Errorf("read source: %w", rerr))
			break
		}
		if l == 0 { // end of input (or an empty file: nothing to store)
			pool.put(b)
			break
		}
		total += int64(l)
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			pool.put(b)
			break
		}
		wg.Add(1)
		go func(stripe uint64, b *stripeBuf, l int, end int64) {
			defer wg.Done()
			defer func() { <-sem }()
			defer pool.put(b)
			rec, err := c.writeStripe(ctx, lay, f.Ino, stripe, 0, b, l)
			if err != nil {
				fail(err)
				return
			}
			done <- written{rec, end}
		}(stripe, b, l, total)
		if l < lay.K*unit {
			break
		}
	}
	wg.Wait()
	close(done)
	<-committed
	return total, firstErr
}

// written is a stripe whose fragments are durable, waiting for its commit.
type written struct {
	rec meta.StripeRec
	end int64 // file offset after the stripe's last byte
}

// commitLoop commits written stripes in batches until done is closed,
// reporting progress in committed user bytes. After a failure it deletes
// the fragments of every stripe it can no longer commit.
func (c *Client) commitLoop(ctx context.Context, ino meta.Ino, done <-chan written, fail func(error), progress func(int64)) {
	var user int64
	discard := func(ws []written) {
		m, err := c.Map(context.Background())
		if err != nil {
			return
		}
		for _, w := range ws {
			c.deleteFragments(m, ino, w.rec, make([]error, len(w.rec.Drives)))
		}
	}
	failed := false
	for w := range done {
		batch := []written{w}
	drain:
		for len(batch) < 64 {
			select {
			case w, ok := <-done:
				if !ok {
					break drain
				}
				batch = append(batch, w)
			default:
				break drain
			}
		}
		if failed || ctx.Err() != nil {
			discard(batch)
			continue
		}
		commits := make([]meta.StripeCommit, len(batch))
		var end int64
		for i, w := range batch {
			commits[i] = meta.StripeCommit{Rec: w.rec}
			end = max(end, w.end)
		}
		if _, err := c.meta.CommitStripes(ctx, ino, commits, uint64(end), time.Now().UnixNano()); err != nil {
			failed = true
			discard(batch)
			if errors.Is(err, meta.ErrPoolFull) {
				err = fmt.Errorf("%w: %v", ErrPoolFull, err)
			}
			fail(fmt.Errorf("commit: %w", err))
			continue
		}
		for _, w := range batch {
			user += int64(w.rec.Len)
		}
		if progress != nil {
			progress(user)
		}
	}
}

// readStripe fills the data shards of b (full-unit layout) from r and
// returns how many bytes it read; less than k*unit only at the end of r.
func readStripe(r io.Reader, b *stripeBuf, k, unit int) (int, error) {
	l := 0
	for i := 0; i < k; i++ {
		n, err := io.ReadFull(r, b.shard(i, unit))
		l += n
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return l, nil
		}
		if err != nil {
			return l, err
		}
	}
	return l, nil
}
