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

// Get writes the content of file p to w, as it was when Get found p,
// through a File: its reads are sequential and a stripe each, so the
// File's read-ahead keeps the next stripes in flight while w takes one.
// Holes (stripes never written) read as zeros.
func (c *Client) Get(ctx context.Context, p string, w io.Writer, o GetOptions) (meta.Attr, error) {
	a, err := c.Resolve(ctx, p)
	if err != nil {
		return a, err
	}
	if a.Type != meta.TypeFile {
		return a, fmt.Errorf("get %s: %w", p, meta.ErrIsDir)
	}
	if a.Size == 0 {
		return a, nil
	}
	f, err := c.OpenAttr(a, p)
	if err != nil {
		return a, err
	}
	defer f.Close()
	// Every stripe record at once, as of now: a Put that replaces p while
	// this Get runs removes the inode, and with it the records that later
	// reads would fetch (its fragments stay until the collector's turn).
	sb := StripeBytes(a.Layout)
	f.mu.Lock()
	_, err = f.recordsLocked(ctx, 0, (a.Size-1)/uint64(sb))
	f.mu.Unlock()
	if err != nil {
		return a, fmt.Errorf("get %s: %w", p, err)
	}
	buf := make([]byte, sb)
	for off := int64(0); off < int64(a.Size); {
		n := min(sb, int64(a.Size)-off)
		if err := f.sendStripe(ctx, w, buf[:n], off); err != nil {
			return a, err
		}
		off += n
		if o.Progress != nil {
			o.Progress(off)
		}
	}
	return a, nil
}

// sendStripe writes the len(buf) bytes of f at off, all in one stripe and
// before the end of the file, to w. They are read as ReadAt reads them
// (stream detection, read-ahead, the stripe cache), but a stripe the read
// takes whole goes to w straight from the cache's buffers; anything else
// (a hole, a range read, unflushed writes) is read into buf first.
func (f *File) sendStripe(ctx context.Context, w io.Writer, buf []byte, off int64) error {
	f.mu.Lock()
	pl, err := f.planLocked(ctx, buf, off)
	if err != nil {
		f.mu.Unlock()
		return err
	}
	if pl.locked {
		_, err := f.readLocked(ctx, buf, off)
		f.mu.Unlock()
		if err == nil {
			_, err = w.Write(buf)
		}
		return err
	}
	f.mu.Unlock()
	sb := StripeBytes(pl.lay)
	s := uint64(off / sb)
	e := pl.entries[s]
	if e == nil {
		if err = f.readPlan(ctx, pl, buf, off); err == nil {
			_, err = w.Write(buf)
		}
	} else if err = e.wait(ctx); err == nil {
		err = writeEntry(w, e, int(off%sb), len(buf))
	}
	f.dropFailed(pl)
	if e != nil && err == nil {
		// Get reads no stripe twice: its buffers go back to the pool
		// now rather than when the cache would evict them.
		f.mu.Lock()
		if f.mu.cache.entries[s] == e {
			f.mu.cache.drop(s)
		}
		f.mu.Unlock()
	}
	pl.release()
	return err
}

// writeEntry writes the stripe's user bytes [at, at+n) of the filled cache
// entry e to w, from its shards, zeros beyond the stripe's length.
func writeEntry(w io.Writer, e *cacheEntry, at, n int) error {
	for pos, end := at, at+n; pos < end; {
		if pos >= e.len {
			_, err := w.Write(make([]byte, end-pos))
			return err
		}
		sh, o := pos/e.shard, pos%e.shard
		k := min(e.shard-o, min(end, e.len)-pos)
		if _, err := w.Write(e.shards[sh][o : o+k]); err != nil {
			return err
		}
		pos += k
	}
	return nil
}
