package client

import (
	"context"
	"time"

	"poolfs/internal/clustermap"
	"poolfs/internal/meta"
	"poolfs/internal/placement"
	"poolfs/internal/stripeio"
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
func (c *Client) repairLater(m *clustermap.Map, st *stripeio.Stripe, rec meta.StripeRec,
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
		c.log.Warn("read repair skipped: too many running", "ino", st.Ino, "stripe", rec.Stripe)
		return
	}
	go func() {
		defer func() { <-c.repairs }()
		ctx, cancel := context.WithTimeout(context.Background(), repairTimeout)
		defer cancel()
		at := stripeio.OnMap(c.drives, m)
		for _, j := range jobs {
			key := st.Key(j.i)
			frag := stripeio.NewFragment(st, j.shard)
			errs := stripeio.WriteFragments(ctx, at, st, []stripeio.Loc{{Index: j.i, Drive: j.id}}, [][]byte{frag})
			if err := errs[0]; err != nil {
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
