package meta

import (
	"context"
	"encoding/binary"
	"fmt"
)

// The GC queue holds stripe generations whose fragments may be deleted:
// old generations replaced by CommitStripes, stripes cut by a truncate,
// stripes of destroyed inodes, and fragments moved by ReplaceStripeDrives.
// An item is queued in the same transaction that made its fragments
// unreachable, so a crash can never lose one. The fragment collector
// deletes the fragments (idempotently; a fragment may already be gone) and
// then calls GCDone. Sequence numbers are unique but, with several
// metadata servers, not in commit order.

func (o *op) enqueueGC(g GCItem) error {
	seq, err := o.s.gcs.take(o)
	if err != nil {
		return err
	}
	return o.tx.Put(gcKey(seq), encodeGC(&g))
}

// GCList returns up to limit (<= 0: all) queued items, by sequence number.
// The caller owns the result.
func (s *Store) GCList(ctx context.Context, limit int) ([]GCItem, error) {
	var out []GCItem
	err := s.view(ctx, func(o *op) error {
		out = out[:0]
		var derr error
		p := []byte{pGC}
		err := o.tx.Scan(p, prefixEnd(p), limit, func(k, v []byte) bool {
			g, err := decodeGC(binary.BigEndian.Uint64(k[1:]), v)
			if err != nil {
				derr = err
				return false
			}
			out = append(out, g)
			return true
		})
		if err == nil {
			err = derr
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("gc list: %w", err)
	}
	return out, nil
}

// GCBytes returns, per drive, the raw fragment bytes of the first limit
// (<= 0: all) queued items (GCItemBytes): what the collector has yet to
// delete there.
func (s *Store) GCBytes(ctx context.Context, limit int) (map[uint32]int64, error) {
	items, err := s.GCList(ctx, limit)
	if err != nil {
		return nil, err
	}
	return GCItemBytes(items), nil
}

// GCItemBytes sums the raw bytes of items' fragments (ShardSize each) per
// drive; NoDrive holds nothing.
func GCItemBytes(items []GCItem) map[uint32]int64 {
	out := map[uint32]int64{}
	for _, it := range items {
		for _, id := range it.Drives {
			if id != NoDrive {
				out[id] += int64(it.ShardSize)
			}
		}
	}
	return out
}

// GCDone removes the items seqs from the queue; unknown seqs are ignored.
func (s *Store) GCDone(ctx context.Context, seqs []uint64) error {
	err := s.update(ctx, func(o *op) error {
		for _, seq := range seqs {
			if err := o.tx.Delete(gcKey(seq)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("gc done: %w", err)
	}
	return nil
}

// Pool usage is the raw bytes (ShardSize * number of fragments) of the
// committed stripes of each pool, kept in shards (key u pool shard) so that
// concurrent commits on a shared engine touch different keys. Stripes in
// the GC queue are no longer counted. A transaction adds to one shard; the
// limit check (only when a limit is set) reads them all.

// usageDelta collects the usage changes of one transaction.
type usageDelta struct {
	shard byte
	d     map[uint32]int64
}

func (o *op) usage(ino Ino, stripe uint64) *usageDelta {
	return &usageDelta{shard: byte((uint64(ino) + stripe) % shards), d: map[uint32]int64{}}
}

func (u *usageDelta) add(pool uint32, delta int64) { u.d[pool] += delta }

func (u *usageDelta) flush(o *op) error {
	for pool, d := range u.d {
		if d == 0 {
			continue
		}
		if err := o.addCounter(usageKey(pool, u.shard), d); err != nil {
			return err
		}
	}
	return nil
}

// checkLimit returns ErrPoolFull if adding grow bytes to pool's usage would
// exceed its limit.
func (o *op) checkLimit(pool uint32, grow int64) error {
	if grow <= 0 {
		return nil
	}
	used, limit, err := o.poolUsage(pool)
	if err != nil || limit == 0 {
		return err
	}
	if used+uint64(grow) > limit {
		return fmt.Errorf("pool %d: %d of %d bytes used, commit needs %d: %w", pool, used, limit, grow, ErrPoolFull)
	}
	return nil
}

func (o *op) poolUsage(pool uint32) (used, limit uint64, err error) {
	v, ok, err := o.get(limitKey(pool))
	if err != nil {
		return 0, 0, err
	}
	if ok {
		if limit, err = decodeU64(v); err != nil {
			return 0, 0, err
		}
	}
	sum, err := o.sumCounters(u32([]byte{pUsage}, pool))
	return uint64(max(sum, 0)), limit, err
}

// SetPoolLimit sets the raw-byte limit of pool (0: no limit). Lowering it
// below the current usage refuses further growth but removes nothing.
func (s *Store) SetPoolLimit(ctx context.Context, pool uint32, rawBytes uint64) error {
	err := s.update(ctx, func(o *op) error {
		if rawBytes == 0 {
			return o.tx.Delete(limitKey(pool))
		}
		return o.tx.Put(limitKey(pool), encodeU64(rawBytes))
	})
	if err != nil {
		return fmt.Errorf("set pool %d limit: %w", pool, err)
	}
	return nil
}

// PoolUsage returns the raw bytes committed in pool and its limit (0: none).
func (s *Store) PoolUsage(ctx context.Context, pool uint32) (used, limit uint64, err error) {
	err = s.view(ctx, func(o *op) error {
		used, limit, err = o.poolUsage(pool)
		return err
	})
	if err != nil {
		return 0, 0, fmt.Errorf("pool %d usage: %w", pool, err)
	}
	return used, limit, nil
}
