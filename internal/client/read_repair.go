package client

import (
	"context"
	"time"

	"poolfs/internal/clustermap"
	"poolfs/internal/erasure"
	"poolfs/internal/meta"
	"poolfs/internal/placement"
)

// DefaultRepairsInFlight is Options.RepairsInFlight's default.
const DefaultRepairsInFlight = 4

// repairTimeout bounds one background read repair.
const repairTimeout = 30 * time.Second

// repairLater rewrites, in the background, the fragments lost (indexes
// into shards, which holds the whole stripe) that are on drives still up.
// It copies what it needs and returns at once: a read never waits for its
// repair. At most Options.RepairsInFlight repairs run at once; one more is
// dropped with a log line (scrub or rebuild will find the fragment again).
// Failures are logged, not returned: the read already succeeded.
func (c *Client) repairLater(m *clustermap.Map, lay meta.Layout, ino meta.Ino, rec meta.StripeRec,
	shards [][]byte, lost []int, errs []error) {
	type job struct {
		i     int
		id    placement.DriveID
		shard []byte
		cause error
	}
	var jobs []job
	for _, i := range lost {
		id := placement.DriveID(rec.Drives[i])
		if dr, err := m.Drive(id); err != nil || dr.State != clustermap.StateUp {
			continue
		}
		jobs = append(jobs, job{i: i, id: id, shard: append([]byte(nil), shards[i]...), cause: errs[i]})
	}
	if len(jobs) == 0 {
		return
	}
	select {
	case c.repairs <- struct{}{}:
	default:
		c.log.Warn("read repair skipped: too many running", "ino", uint64(ino), "stripe", rec.Stripe)
		return
	}
	go func() {
		defer func() { <-c.repairs }()
		ctx, cancel := context.WithTimeout(context.Background(), repairTimeout)
		defer cancel()
		s := int(rec.ShardSize)
		for _, j := range jobs {
			d, err := c.drives.Drive(m, j.id)
			if err != nil {
				continue
			}
			key := erasure.FragmentKey{Ino: uint64(ino), Stripe: rec.Stripe, Gen: rec.Gen, Index: uint8(j.i)}
			frag := erasure.AlignedBuffer(erasure.FragmentSize(s))
			copy(frag[erasure.HeaderSize(s):], j.shard)
			erasure.SealFragment(frag, erasure.Header{Key: key, K: lay.K, M: lay.M, Pool: lay.Pool,
				StripeLen: rec.Len, ShardSize: uint32(s)})
			if err := d.WriteFragment(ctx, key, frag); err != nil {
				c.log.Warn("read repair failed", "fragment", key.String(), "drive", j.id.String(), "err", err)
				continue
			}
			c.log.Info("read repair", "fragment", key.String(), "drive", j.id.String(), "cause", j.cause)
			if c.opts.OnRepair != nil {
				c.opts.OnRepair(j.id)
			}
		}
	}()
}
