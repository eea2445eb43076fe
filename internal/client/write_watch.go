package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"poolfs/internal/clustermap"
	"poolfs/internal/placement"
)

// errTargetDown is the cause of a stripe write given up because one of its
// drives left the up drives while the write waited for it (its server hangs
// or is cut off: nothing refuses or resets the connection, so the write
// would otherwise wait for TCP to give up, many minutes). It is a
// clustermap.ErrNoDrive, so writeStripe places the stripe again at the new
// map epoch, around that drive.
var errTargetDown = fmt.Errorf("%w: a drive of the stripe is no longer up", clustermap.ErrNoDrive)

// watchTargets returns a context of ctx for the fragment writes of a stripe
// to drives, and the function that ends it. While the writes run, every
// half MapMaxAge, the client's map is consulted (fetched again once it is
// MapMaxAge old); once it says one of the drives is not up (the management
// service marked it down or failed), the context is cancelled with a cause
// that is errTargetDown. So is it once the server of one of the drives
// made no progress for Options.UnreachableAfter (unreachable.go): the
// cause is then errUnreachable, and that server is avoided and reported. A write
// that ends before the first check costs one timer.
func (c *Client) watchTargets(ctx context.Context, wm *clustermap.Map, drives []uint32) (context.Context, func()) {
	wctx, cancel := context.WithCancelCause(ctx)
	period := min(c.opts.MapMaxAge, c.opts.UnreachableAfter) / 2
	var timer *time.Timer
	check := func() {
		if wctx.Err() != nil {
			return
		}
		if id, ok := c.unreach.stuck(wm, drives, c.opts.UnreachableAfter, time.Now()); ok {
			c.unreachable(wm, id, true)
			cancel(fmt.Errorf("%w: drive %v made no progress for %v", errUnreachable, id, c.opts.UnreachableAfter))
			return
		}
		if m, err := c.Map(wctx); err == nil {
			for _, id := range drives {
				if d, err := m.Drive(placement.DriveID(id)); err != nil || d.State != clustermap.StateUp {
					cancel(fmt.Errorf("%w: drive %v at map epoch %d", errTargetDown, placement.DriveID(id), m.Epoch))
					return
				}
			}
		}
		if wctx.Err() == nil {
			timer.Reset(period)
		}
	}
	timer = time.AfterFunc(time.Hour, check)
	timer.Reset(period) // after timer is set: check may use it
	return wctx, func() {
		timer.Stop()
		cancel(nil)
	}
}

// targetDown returns the cause of wctx if watchTargets gave the write up,
// else nil.
func targetDown(wctx context.Context) error {
	if err := context.Cause(wctx); errors.Is(err, errTargetDown) {
		return err
	}
	return nil
}
