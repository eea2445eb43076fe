package client

import (
	"context"
	"sync"
	"time"

	"poolfs/internal/erasure"
	"poolfs/internal/meta"
	"poolfs/internal/placement"
)

// readFold reads stripe rec with its extents laid over, for a fold, into
// b's data shards in the full-unit layout (what writeStripe takes). The
// extents' parts are read from their log stripes at the same time as the
// generation under them (readFoldBase), and laid over it once both are in:
// one after the other, the two reads were more than half of a fold's time
// under random writes.
func (c *Client) readFold(ctx context.Context, lay meta.Layout, ino meta.Ino, rec meta.StripeRec, b *stripeBuf, name string) ([][]byte, error) {
	if len(rec.Deltas) == 0 {
		return c.readStripe(ctx, lay, ino, rec, b, name)
	}
	type fetched struct {
		parts *deltaParts
		err   error
	}
	deltas := make(chan fetched, 1)
	go func() {
		ps, err := c.readDeltas(ctx, lay, ino, rec, 0, int(rec.Len), name)
		deltas <- fetched{ps, err}
	}()
	shards, err := c.readFoldBase(ctx, lay, ino, rec, b, name)
	d := <-deltas
	if d.err == nil {
		defer d.parts.release(c)
	}
	if err != nil {
		return nil, err
	}
	if d.err != nil {
		return nil, d.err
	}
	d.parts.apply(intoShards(shards, int(rec.ShardSize)))
	return shards, nil
}

// readFoldBase reads the generation of stripe rec (without its extents)
// into b's data shards, for readFold. Of it, it reads only the checksum
// blocks that the extents do not cover whole: random 64 KiB writes fold a
// stripe when they cover half to three quarters of it, and reading the
// whole generation under them was a third of what the folds read. A
// stripe of short shards, one whose extents cover no whole block, or a
// ranged read that fails (a drive down or missing: the whole-stripe read
// reconstructs) is read whole, as readStripe does.
func (c *Client) readFoldBase(ctx context.Context, lay meta.Layout, ino meta.Ino, rec meta.StripeRec, b *stripeBuf, name string) ([][]byte, error) {
	unit, k := int(lay.Unit), lay.K
	if int(rec.ShardSize) != unit {
		return c.readStripe(ctx, lay, ino, rec, b, name)
	}
	var cov spanSet
	for _, d := range rec.Deltas {
		cov.add(int(d.Off), int(d.Off)+int(d.Len))
	}
	l := int(rec.Len)
	// parts[i]: the ranges of shard i to read, whole blocks, merged.
	parts := make([][]shardRange, k)
	skipped := false
	for i := 0; i < k && i*unit < l; i++ {
		for off := 0; off < unit && i*unit+off < l; off += erasure.BlockSize {
			a, z := i*unit+off, min(i*unit+off+erasure.BlockSize, (i+1)*unit, l)
			if cov.covers(a, z) {
				skipped = true
				continue
			}
			p := parts[i]
			if n := len(p); n > 0 && p[n-1].off+p[n-1].n == off {
				p[n-1].n += z - a
			} else {
				parts[i] = append(p, shardRange{idx: i, off: off, n: z - a, at: off})
			}
		}
	}
	if !skipped {
		return c.readStripe(ctx, lay, ino, rec, b, name)
	}
	m, err := c.Map(ctx)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	for i := range parts {
		if len(parts[i]) > 0 && !c.rangeReadable(m, placement.DriveID(rec.Drives[i]), now, isPatient(ctx)) {
			return c.readStripe(ctx, lay, ino, rec, b, name)
		}
	}
	shards := make([][]byte, k)
	ok := make([]bool, k)
	var wg sync.WaitGroup
	for i := range shards {
		shards[i] = b.shard(i, unit)
		clear(shards[i][max(0, min(unit, l-i*unit)):]) // beyond the stripe's bytes
		if len(parts[i]) == 0 {
			ok[i] = true
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok[i] = c.readParts(ctx, m, ino, rec, parts[i], shards[i])
		}()
	}
	wg.Wait()
	for _, o := range ok {
		if !o {
			return c.readStripe(ctx, lay, ino, rec, b, name)
		}
	}
	return shards, nil
}
