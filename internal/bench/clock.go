package bench

import "time"

// Clock tells the time of a task. Measurements take every timestamp from
// a Clock so that tests can script them.
type Clock interface {
	Now() time.Time
}

// SystemClock is the wall clock.
type SystemClock struct{}

// Now implements Clock.
func (SystemClock) Now() time.Time { return time.Now() }

// StepClock is a scripted Clock for tests: the first call to Now returns
// Start and every later call returns the previous time plus Step. It is not
// safe for concurrent use; give each task its own.
type StepClock struct {
	Start time.Time
	Step  time.Duration
	calls int
}

// Now implements Clock.
func (c *StepClock) Now() time.Time {
	t := c.Start.Add(time.Duration(c.calls) * c.Step)
	c.calls++
	return t
}
