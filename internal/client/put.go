package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
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
	// before sending anything. -1: unknown. With a known Size, a source
	// that is also an io.ReaderAt (a file) is read with ReadAt from
	// offset 0 to its end, several stripes at once.
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
	var at io.ReaderAt
	if ra, ok := r.(io.ReaderAt); ok && o.Size >= 0 {
		at = ra // a file: read several stripes at once
	}
	if err := c.writeAll(ctx, f, r, at, p, o.Progress); err != nil {
		cleanup()
		return meta.Attr{}, fmt.Errorf("put %s: %w", p, err)
	}
	// The data is durable before the rename that publishes it can be
	// (sync.go), so the name never points at fragments a power loss took.
	if err := c.syncDrives(ctx); err != nil {
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

// writeAll writes everything r yields (read with at, if not nil) into the new, empty file a through a
// File (its write-behind sends full stripes in the background while the
// next bytes are read) and flushes it: on success every byte is committed.
// It reports the user bytes handed to the File to progress. On error the
// File's background writes are waited for and its buffered bytes dropped,
// so nothing of it is still being written when the caller removes the
// file.
func (c *Client) writeAll(ctx context.Context, a meta.Attr, r io.Reader, at io.ReaderAt, name string, progress func(int64)) error {
	f, err := c.OpenAttr(a, name)
	if err != nil {
		return err
	}
	defer f.Close()
	// The source is read straight into the data shards of stripe buffers,
	// which the File takes over: no byte is copied on its way to the
	// drives. It is read ahead on goroutines of its own (put_source.go).
	lay := a.Layout
	pool := c.bufs.get(lay.K+lay.M, int(lay.Unit))
	next, stop := readSource(r, at, pool, lay.K, int(lay.Unit))
	defer stop()
	var off int64
	for s := uint64(0); ; s++ {
		src := next()
		b, l := src.b, src.l
		if src.err != nil {
			pool.put(b)
			f.Discard()
			return fmt.Errorf("read source: %w", src.err)
		}
		if l == 0 {
			pool.put(b)
			break
		}
		if err := f.writeStripeBuf(ctx, s, b, l); err != nil {
			f.Discard()
			return err
		}
		off += int64(l)
		if progress != nil {
			progress(off)
		}
		if int64(l) < StripeBytes(lay) {
			break
		}
	}
	if err := f.Flush(ctx); err != nil {
		f.Discard()
		return err
	}
	return nil
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
