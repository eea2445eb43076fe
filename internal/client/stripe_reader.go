package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"poolfs/internal/clustermap"
	"poolfs/internal/erasure"
	"poolfs/internal/meta"
	"poolfs/internal/placement"
)

// readStripe reads the data shards of a committed stripe into b (laid out
// for the record's shard size) and returns them. Missing, unreadable or
// corrupt fragments are reconstructed from parity and rewritten (read
// repair). name is used in errors.
func (c *Client) readStripe(ctx context.Context, lay meta.Layout, ino meta.Ino, rec meta.StripeRec, b *stripeBuf, name string) ([][]byte, error) {
	lay, err := recordLayout(lay, rec) // smallfile.go: the stripe's own scheme
	if err != nil {
		return nil, err
	}
	k, width := lay.K, lay.K+lay.M
	if len(rec.Drives) != width {
		return nil, fmt.Errorf("%w: %s stripe %d: record has %d drives, layout %d+%d",
			meta.ErrInvalid, name, rec.Stripe, len(rec.Drives), lay.K, lay.M)
	}
	s := int(rec.ShardSize)
	if s <= 0 || s > b.unit {
		return nil, fmt.Errorf("%w: %s stripe %d: shard size %d", meta.ErrInvalid, name, rec.Stripe, s)
	}
	m, err := c.Map(ctx)
	if err != nil {
		return nil, err
	}
	shards := make([][]byte, width)
	errs := make([]error, width)
	c.fetch(ctx, m, ino, rec, b, s, shards, errs, 0, k)
	bad := 0
	for i := 0; i < k; i++ {
		if errs[i] != nil {
			bad++
		}
	}
	if bad == 0 {
		return shards[:k], nil
	}
	// Degraded: read parity and reconstruct.
	c.fetch(ctx, m, ino, rec, b, s, shards, errs, k, width)
	var lost []int
	for i := range shards {
		if errs[i] != nil {
			shards[i] = nil
			lost = append(lost, i)
		}
	}
	if len(lost) > lay.M {
		return nil, fmt.Errorf("%w: file %s stripe %d: %d of %d fragments unavailable, %d+%d survives %d: %v",
			ErrDataLoss, name, rec.Stripe, len(lost), width, lay.K, lay.M, lay.M, errors.Join(errs...))
	}
	cd, err := c.codec(lay.K, lay.M)
	if err != nil {
		return nil, err
	}
	if err := cd.Reconstruct(shards, false); err != nil {
		return nil, fmt.Errorf("%w: file %s stripe %d: %v", ErrDataLoss, name, rec.Stripe, err)
	}
	c.repair(ctx, m, lay, ino, rec, shards, lost, errs)
	return shards[:k], nil
}

// fetch reads fragments [from, to) of a stripe in parallel into b, checking
// headers and checksums; shards[i] gets the verified shard, errs[i] the
// reason it is unusable.
func (c *Client) fetch(ctx context.Context, m *clustermap.Map, ino meta.Ino, rec meta.StripeRec, b *stripeBuf, s int,
	shards [][]byte, errs []error, from, to int) {
	var wg sync.WaitGroup
	for i := from; i < to; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			shards[i], errs[i] = c.fetchOne(ctx, m, ino, rec, b, s, i)
		}(i)
	}
	wg.Wait()
}

func (c *Client) fetchOne(ctx context.Context, m *clustermap.Map, ino meta.Ino, rec meta.StripeRec, b *stripeBuf, s, i int) ([]byte, error) {
	id := placement.DriveID(rec.Drives[i])
	key := erasure.FragmentKey{Ino: uint64(ino), Stripe: rec.Stripe, Gen: rec.Gen, Index: uint8(i)}
	d, err := c.drives.Drive(m, id)
	if err != nil {
		return nil, err
	}
	got, err := d.ReadFragment(ctx, key, 0, -1, b.frags[i][:cap(b.frags[i])])
	if err != nil {
		return nil, fmt.Errorf("read %v from %v: %w", key, id, err)
	}
	h, data, err := erasure.DecodeFragment(got)
	if err != nil {
		return nil, fmt.Errorf("fragment %v on %v: %w", key, id, err)
	}
	if h.Key != key || int(h.ShardSize) != s || h.StripeLen != rec.Len {
		return nil, fmt.Errorf("%w: fragment on %v is %v (shard %d, len %d), want %v (shard %d, len %d)",
			erasure.ErrCorrupt, id, h.Key, h.ShardSize, h.StripeLen, key, s, rec.Len)
	}
	return data, nil
}

// repair rewrites the fragments that were corrupt or missing on drives
// that are still up. Failures are logged, not returned: the read already
// succeeded, and scrub or rebuild will try again.
func (c *Client) repair(ctx context.Context, m *clustermap.Map, lay meta.Layout, ino meta.Ino, rec meta.StripeRec,
	shards [][]byte, lost []int, errs []error) {
	s := int(rec.ShardSize)
	for _, i := range lost {
		id := placement.DriveID(rec.Drives[i])
		if dr, err := m.Drive(id); err != nil || dr.State != clustermap.StateUp {
			continue
		}
		d, err := c.drives.Drive(m, id)
		if err != nil {
			continue
		}
		key := erasure.FragmentKey{Ino: uint64(ino), Stripe: rec.Stripe, Gen: rec.Gen, Index: uint8(i)}
		frag := erasure.AlignedBuffer(erasure.FragmentSize(s))
		copy(frag[erasure.HeaderSize(s):], shards[i])
		erasure.SealFragment(frag, erasure.Header{Key: key, K: lay.K, M: lay.M, Pool: lay.Pool,
			StripeLen: rec.Len, ShardSize: uint32(s)})
		if err := d.WriteFragment(ctx, key, frag); err != nil {
			c.log.Warn("read repair failed", "fragment", key.String(), "drive", id.String(), "err", err)
			continue
		}
		c.log.Info("read repair", "fragment", key.String(), "drive", id.String(), "cause", errs[i])
	}
}

// deleteFragments removes the fragments of an uncommitted stripe that were
// written (errs[i] == nil), best effort.
func (c *Client) deleteFragments(m *clustermap.Map, ino meta.Ino, rec meta.StripeRec, errs []error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i, id := range rec.Drives {
		if errs[i] != nil {
			continue
		}
		d, err := c.drives.Drive(m, placement.DriveID(id))
		if err != nil {
			continue
		}
		_ = d.DeleteFragment(ctx, erasure.FragmentKey{Ino: uint64(ino), Stripe: rec.Stripe, Gen: rec.Gen, Index: uint8(i)})
	}
}
