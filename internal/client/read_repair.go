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
	var targets []stripeio.Loc
	var frags [][]byte // copies of the shards: the caller reuses its buffers
	for _, i := range lost {
		id := placement.DriveID(rec.Drives[i])
		if dr, err := m.Drive(id); err != nil || dr.State != clustermap.StateUp {
			continue
		}
		targets = append(targets, stripeio.Loc{Index: i, Drive: id})
		frags = append(frags, stripeio.NewFragment(st, shards[i]))
	}
	if len(targets) == 0 {
		return
	}
	select {
	case c.repairs <- struct{}{}:
	default:
		c.log.Warn("read repair skipped: too many running", "ino", st.Ino, "stripe", rec.Stripe)
		return
	}
	if !c.startBg() {
		<-c.repairs
		return // the client is closing (Close)
	}
	go func() {
		defer c.bgRun.Done()
		defer func() { <-c.repairs }()
		ctx, cancel := context.WithTimeout(c.bg, repairTimeout)
		defer cancel()
		for j, err := range stripeio.WriteFragments(ctx, stripeio.OnMap(c.drives, m), st, targets, frags) {
			t := targets[j]
			if err != nil && c.bg.Err() != nil {
				return
			}
			if err != nil {
				c.log.Warn("read repair failed", "fragment", st.Key(t.Index).String(), "drive", t.Drive.String(), "err", err)
				continue
			}
			c.log.Info("read repair", "fragment", st.Key(t.Index).String(), "drive", t.Drive.String(), "cause", errs[t.Index])
			if c.opts.OnRepair != nil {
				c.opts.OnRepair(t.Drive)
			}
		}
	}()
}
