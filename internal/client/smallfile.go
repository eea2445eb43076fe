package client

import (
	"context"
	"fmt"
	"sync"
	"time"

	"poolfs/internal/clustermap"
	"poolfs/internal/meta"
)

// Small files and narrow stripes.
//
// A stripe record carries its own scheme (meta.StripeRec.K; parity is the
// rest of its drives), so one file may hold stripes of different schemes.
// Two uses:
//
//   - Small files. Stripe 0 of a file is written as a mirror, one data
//     fragment and M copies of it (1+M drives, the layout's parity count,
//     so it survives as many failures as the erasure-coded stripes), when it
//     holds at most the pool's small-file threshold of user bytes
//     (clustermap.Pool.SmallFileLimit; 0 turns mirroring off) and no more
//     than one stripe unit. A
//     4 KiB file then costs three 4 KiB writes in an 8+2 pool instead of
//     ten, and one read. The file's layout stays erasure-coded: when the file
//     grows past the threshold, the read-modify-write that writes stripe 0's
//     next generation writes it erasure-coded.
//   - Narrow layouts. A layout (and so a stripe) may be narrower than the
//     pool's stripe width W (the drives of a placement group); a stripe of
//     width w < W uses the first w drives of its PG's set. Rebuild keeps it
//     on w distinct drives of that set.
//
// A mirror is Reed-Solomon with one data shard. With k = 1 each parity
// shard is the data shard times one coefficient of the generator matrix;
// klauspost/reedsolomon's coefficients are 1 there, so the parity
// fragments are literal copies of the data fragment (internal/erasure
// TestMirrorIsCopies checks it, for 1+1 to 1+4), and any one surviving copy
// reconstructs the stripe through the ordinary decode path.

// writeLayout returns the layout stripe stripe of a file with layout lay is
// written with when it holds l user bytes: lay itself, or for a small
// file's stripe 0 a mirror of 1+lay.M copies.
func (c *Client) writeLayout(ctx context.Context, lay meta.Layout, stripe uint64, l int) meta.Layout {
	if stripe != 0 || lay.K == 1 || l > int(lay.Unit) {
		return lay
	}
	m, err := c.smallFileMap(ctx)
	if err != nil {
		return lay // placeAndWrite reports the error
	}
	p, err := m.Pool(lay.Pool)
	if err != nil || int64(l) > p.SmallFileLimit() || p.SmallFileLimit() == 0 {
		return lay
	}
	lay.K, lay.Mirror = 1, true
	return lay
}

// thresholdMaxAge bounds how long a client writes small files with a map
// older than that: the client otherwise keeps its map until a drive error,
// and a mount would never see `poolfs pool set small-file-threshold`.
const thresholdMaxAge = 5 * time.Second

// smallFiles remembers when writeLayout last fetched the map.
type smallFiles struct {
	mu      sync.Mutex
	fetched time.Time
}

// smallFileMap returns the current map, fetched again when the last fetch
// for small files is older than thresholdMaxAge (one RPC per interval).
func (c *Client) smallFileMap(ctx context.Context) (*clustermap.Map, error) {
	c.small.mu.Lock()
	stale := time.Since(c.small.fetched) > thresholdMaxAge
	if stale {
		c.small.fetched = time.Now()
	}
	c.small.mu.Unlock()
	if stale {
		return c.RefreshMap(ctx)
	}
	return c.Map(ctx)
}

// recordLayout returns the layout a committed stripe was written with: the
// file's, with the record's own scheme.
func recordLayout(lay meta.Layout, rec meta.StripeRec) (meta.Layout, error) {
	k, m := rec.Scheme(lay.K)
	if k < 1 || m < 0 || k+m > lay.Width() {
		return lay, fmt.Errorf("%w: stripe %d: scheme %d+%d on %d drives, layout %d+%d",
			meta.ErrInvalid, rec.Stripe, k, m, len(rec.Drives), lay.K, lay.M)
	}
	lay.K, lay.M, lay.Mirror = k, m, k == 1 && m > 0
	return lay, nil
}
