package recovery

import (
	"context"
	"time"
)

// Run executes tasks in their order, with at most workers() of them in
// flight; workers is consulted before every launch, so a priority change
// takes effect during a run. do performs one task; done (which may be nil)
// is called once per started task with do's result, from one goroutine at a
// time. Run returns when every started task finished: ctx.Err() if ctx
// ended first, else nil (task errors go to done, not to the result).
func Run(ctx context.Context, tasks []Task, workers func() int, do func(ctx context.Context, t *Task) error, done func(t *Task, err error)) error {
	type result struct {
		t   *Task
		err error
	}
	results := make(chan result)
	inflight := 0
	finish := func(r result) {
		inflight--
		if done != nil {
			done(r.t, r.err)
		}
	}
	var err error
	for i := range tasks {
		for inflight >= max(1, workers()) {
			select {
			case r := <-results:
				finish(r)
			case <-time.After(200 * time.Millisecond): // re-read workers()
			}
		}
		if err = ctx.Err(); err != nil {
			break
		}
		inflight++
		go func(t *Task) { results <- result{t, do(ctx, t)} }(&tasks[i])
	}
	for inflight > 0 {
		finish(<-results)
	}
	return err
}
