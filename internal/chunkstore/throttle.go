package chunkstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"poolfs/internal/erasure"
)

// SpeedModel describes the speed of an emulated drive. Each I/O occupies
// the drive for max(1/IOPS, Latency + bytes/BW); I/Os are served one at a
// time, like one disk head, so concurrent requests queue.
type SpeedModel struct {
	Name    string
	ReadBW  int64         // bytes/s; 0 = unlimited
	WriteBW int64         // bytes/s; 0 = unlimited
	IOPS    int           // operations/s; 0 = unlimited
	Latency time.Duration // per-operation access time (seek + rotation)
}

// Speed models. The HDD figures are typical of current 3.5" nearline (7200
// rpm) and 2.5" enterprise SAS (10k, 15k) drives: sustained media rate,
// random IOPS with a queue (NCQ), and an access time of half a rotation
// plus an effective short seek. "ssd" is a SATA SSD; "none" means no
// throttling.
var speedModels = []SpeedModel{
	{Name: "hdd-7200", ReadBW: 190e6, WriteBW: 180e6, IOPS: 150, Latency: 6500 * time.Microsecond},
	{Name: "hdd-10k", ReadBW: 230e6, WriteBW: 220e6, IOPS: 220, Latency: 4500 * time.Microsecond},
	{Name: "hdd-15k", ReadBW: 260e6, WriteBW: 250e6, IOPS: 300, Latency: 3300 * time.Microsecond},
	{Name: "ssd", ReadBW: 550e6, WriteBW: 500e6, IOPS: 90000, Latency: 60 * time.Microsecond},
	{Name: "none"},
}

// ModelByName returns a predefined model: "hdd-7200", "hdd-10k",
// "hdd-15k", "ssd" or "none".
func ModelByName(name string) (SpeedModel, error) {
	for _, m := range speedModels {
		if m.Name == name {
			return m, nil
		}
	}
	return SpeedModel{}, fmt.Errorf("%w: unknown speed model %q", ErrInvalid, name)
}

// Scale returns m slowed down by factor (0 < factor; 0.1 = ten times
// slower): bandwidths and IOPS are multiplied by factor and latency divided
// by it, so every I/O takes 1/factor as long and the shape of an experiment
// (queueing, latency against transfer time) is kept on smaller drives.
func (m SpeedModel) Scale(factor float64) SpeedModel {
	if factor <= 0 || factor == 1 {
		return m
	}
	s := m
	s.Name = fmt.Sprintf("%s@%g", m.Name, factor)
	s.ReadBW = int64(float64(m.ReadBW) * factor)
	s.WriteBW = int64(float64(m.WriteBW) * factor)
	s.IOPS = int(float64(m.IOPS) * factor)
	if m.IOPS > 0 && s.IOPS == 0 {
		s.IOPS = 1
	}
	s.Latency = time.Duration(float64(m.Latency) / factor)
	return s
}

// unlimited reports whether the model never delays.
func (m SpeedModel) unlimited() bool {
	return m.ReadBW <= 0 && m.WriteBW <= 0 && m.IOPS <= 0 && m.Latency <= 0
}

// Service returns how long one I/O of n bytes at bandwidth bw occupies the
// drive.
func (m SpeedModel) Service(n, bw int64) time.Duration {
	d := m.Latency
	if bw > 0 {
		d += time.Duration(float64(n) / float64(bw) * float64(time.Second))
	}
	if m.IOPS > 0 {
		d = max(d, time.Second/time.Duration(m.IOPS))
	}
	return d
}

// Clock is the time source of Throttle; tests inject a manual clock.
type Clock interface {
	Now() time.Time
	// SleepUntil waits until t or until ctx is done, returning ctx.Err()
	// then. Waking at a deadline rather than after a duration keeps
	// concurrent sleepers on one timeline.
	SleepUntil(ctx context.Context, t time.Time) error
}

// SystemClock is the real clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// Sleep waits for d or ctx.
func (SystemClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// SleepUntil waits until t or ctx.
func (c SystemClock) SleepUntil(ctx context.Context, t time.Time) error {
	return c.Sleep(ctx, time.Until(t))
}

// throttled serializes I/Os on a timeline: an I/O arriving at t starts at
// max(t, busyUntil) and completes Service() later; the caller is delayed
// until then. The real I/O runs first, overlapping the modelled time.
type throttled struct {
	d     Drive
	m     SpeedModel
	clock Clock
	mu    struct {
		sync.Mutex
		busyUntil time.Time
	}
}

// Throttle wraps d so that it behaves like a drive of model m. A nil clock
// means SystemClock. Writes, reads and deletes occupy the drive; Stat and
// ListFragments are free. If ctx ends while an I/O waits, the I/O has
// happened but ctx.Err() is returned.
func Throttle(d Drive, m SpeedModel, clock Clock) Drive {
	if m.unlimited() {
		return d
	}
	if clock == nil {
		clock = SystemClock{}
	}
	return &throttled{d: d, m: m, clock: clock}
}

// queueSlack: an I/O arriving this soon after the drive went idle counts
// as queued. It absorbs the timer lateness of a caller that issues I/Os back
// to back, which would otherwise add up to idle gaps.
const queueSlack = 2 * time.Millisecond

// wait books an I/O of duration svc that arrived at arrival and sleeps
// until it completes.
func (t *throttled) wait(ctx context.Context, arrival time.Time, svc time.Duration) error {
	t.mu.Lock()
	start := t.mu.busyUntil
	if arrival.Sub(start) > queueSlack {
		start = arrival // the drive was idle
	}
	end := start.Add(svc)
	t.mu.busyUntil = end
	t.mu.Unlock()
	return t.clock.SleepUntil(ctx, end)
}

func (t *throttled) WriteFragment(ctx context.Context, key erasure.FragmentKey, frag []byte) error {
	arrival := t.clock.Now()
	if err := t.d.WriteFragment(ctx, key, frag); err != nil {
		return err
	}
	return t.wait(ctx, arrival, t.m.Service(int64(len(frag)), t.m.WriteBW))
}

func (t *throttled) ReadFragment(ctx context.Context, key erasure.FragmentKey, off, n int64, dst []byte) ([]byte, error) {
	arrival := t.clock.Now()
	b, err := t.d.ReadFragment(ctx, key, off, n, dst)
	if err != nil {
		return nil, err
	}
	return b, t.wait(ctx, arrival, t.m.Service(int64(len(b)), t.m.ReadBW))
}

func (t *throttled) DeleteFragment(ctx context.Context, key erasure.FragmentKey) error {
	arrival := t.clock.Now()
	if err := t.d.DeleteFragment(ctx, key); err != nil {
		return err
	}
	return t.wait(ctx, arrival, t.m.Service(0, 0))
}

func (t *throttled) ListFragments(ctx context.Context, fn func(key erasure.FragmentKey, size int64, mtime time.Time) error) error {
	return t.d.ListFragments(ctx, fn)
}

func (t *throttled) Stat(ctx context.Context) (Usage, error) { return t.d.Stat(ctx) }

// Sync occupies the drive for one access, like a cache flush.
func (t *throttled) Sync(ctx context.Context) error {
	arrival := t.clock.Now()
	if err := t.d.Sync(ctx); err != nil {
		return err
	}
	return t.wait(ctx, arrival, t.m.Service(0, 0))
}
