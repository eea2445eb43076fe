package recovery

import (
	"context"
	"time"

	"poolfs/internal/placement"
)

// Limits bound the recovery I/O in flight. Depth is the number of tasks
// that may use one drive at once (as a source or a target), at least 1;
// Max, if positive, also bounds the tasks in flight over the whole pool.
//
// A per-drive depth rather than a global task count is what lets a
// declustered rebuild run at the speed of the whole pool: every surviving
// drive is kept fed with Depth tasks, however many drives there are,
// while the grouped layout is held back by its one hot spare, which every
// task writes to. A task counts against each of its drives from start to
// end, but uses each for one I/O only; the storage server admits those
// I/Os one by one (its rebuild gate), so Depth is a queue of work ready
// for a drive, not the drive's I/O depth.
type Limits struct {
	Depth int
	Max   int
}

// Run executes tasks, most lost fragments first, launching a task when
// every drive it reads or writes has fewer than Depth tasks in flight (and
// fewer than Max tasks run in all). When the first pending task cannot
// start, later ones whose drives have room may, but not on a drive that a
// task with more lost fragments still needs (Admission); with nothing in
// flight the first pending task always starts. limits is consulted at least every
// 200 ms, so a priority change takes effect during a run. do performs one
// task; done (which may be nil) is called once per started task with do's
// result, from one goroutine at a time. Run returns when every started task
// finished: ctx.Err() if ctx ended first, else nil (task errors go to done,
// not to the result).
func Run(ctx context.Context, tasks []Task, limits func() Limits, do func(ctx context.Context, t *Task) error, done func(t *Task, err error)) error {
	type result struct {
		i   int
		err error
	}
	results := make(chan result)
	adm := NewAdmission(tasks) // which task starts next
	finish := func(r result) {
		adm.Done(r.i)
		if done != nil {
			done(&tasks[r.i], r.err)
		}
	}
	lim, limAt := limits(), time.Now()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for adm.Pending() > 0 && ctx.Err() == nil {
		if time.Since(limAt) >= 200*time.Millisecond {
			lim, limAt = limits(), time.Now()
		}
		i, ok := adm.Next(lim)
		if !ok {
			select {
			case r := <-results:
				finish(r)
			case <-tick.C: // re-read limits
			}
			continue
		}
		go func() { results <- result{i, do(ctx, &tasks[i])} }()
	}
	for adm.InFlight() > 0 {
		finish(<-results)
	}
	return ctx.Err()
}

// taskDrives lists the drives a task reads or writes.
func taskDrives(t *Task) []placement.DriveID {
	out := make([]placement.DriveID, 0, len(t.Sources)+len(t.Targets))
	for _, s := range t.Sources {
		out = append(out, s.Drive)
	}
	return append(out, t.Targets...)
}
