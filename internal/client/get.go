package client

import (
	"context"
	"errors"
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
		n, err := f.ReadAt(ctx, buf, off)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return a, werr
			}
			off += int64(n)
			if o.Progress != nil {
				o.Progress(off)
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return a, err
		}
	}
	return a, nil
}
