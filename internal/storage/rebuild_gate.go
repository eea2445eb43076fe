package storage

import (
	"context"
	"sync"
	"time"

	"poolfs/internal/placement"
	"poolfs/internal/recovery"
)

// The rebuild gate schedules a server's recovery I/O against its clients'
// I/O, drive by drive, the way an array's I/O scheduler does (md's
// speed_limit_min/max, a controller's rebuild priority):
//
//   - A drive with no client I/O in flight and none for a while (a few of
//     its rebuild I/O times) is idle: rebuild takes it whole, keeping
//     recovery.GateIdleDepth rebuild I/Os queued so it never waits between two of them.
//     This holds at every priority: priority only matters when clients
//     compete, so an idle pool rebuilds at the speed of its drives.
//   - On a drive clients use, rebuild takes at most the share of the
//     drive's time that the task's priority allows (ReconstructArgs.Share),
//     one I/O at a time, in slots: time is cut into periods of svc/share
//     (svc: the rebuild I/O time, averaged over the server's drives), and a
//     busy drive starts at most one rebuild I/O per period, in the first
//     part of it. The periods are aligned on the clock, the same on every
//     drive, so the drives do their rebuild I/O at about the same time and
//     are free for clients at the same time. That matters because a client
//     stripe I/O waits for the slowest of its k+m drives: with independent
//     timing, a rebuild that takes a fraction u of every drive's time would
//     delay almost every stripe (1-(1-u)^10 of them for 8+2); with aligned
//     slots it delays about a fraction u of them.
//
// Each rebuild I/O holds its drive only for that I/O, not for the whole
// task: a source is free for the next task as soon as its fragment is read,
// while the task decodes and its target writes. That pipelining, and the
// idle rule, are what let a rebuild reach the drives' aggregate bandwidth.
//
// The gate sees the I/O that passes through this server: client I/O on its
// drives (storage.Read, Write, Delete, Sync) and the reads and writes of the
// reconstruct tasks it runs on its own drives. A task that reads a peer's
// drive does so through that peer's storage.Read, which the peer counts as
// client I/O (so a multi-server rebuild is gated conservatively there).
type ioGate struct {
	mu     sync.Mutex
	drives map[placement.DriveID]*gateDrive // guarded by mu
	svc    time.Duration                    // guarded by mu: mean rebuild I/O service time
}

// gateDrive is one drive's state in the gate; every field is guarded by
// ioGate.mu.
type gateDrive struct {
	rebuild  int           // rebuild I/Os in flight
	client   int           // client I/Os in flight
	clientAt time.Time     // when the last client I/O ended
	started  time.Time     // when the last rebuild I/O was admitted
	ended    time.Time     // when the last rebuild I/O ended
	wake     chan struct{} // closed (and replaced) when a rebuild I/O ends
}

const (
	// A drive is idle once no client I/O has been seen for idleAfter times
	// the rebuild I/O time, clamped to [minIdle, maxIdle].
	idleAfter = 4
	minIdle   = 10 * time.Millisecond
	maxIdle   = 5 * time.Second
)

func (g *ioGate) driveLocked(id placement.DriveID) *gateDrive {
	if g.drives == nil {
		g.drives = map[placement.DriveID]*gateDrive{}
	}
	d := g.drives[id]
	if d == nil {
		d = &gateDrive{wake: make(chan struct{})}
		g.drives[id] = d
	}
	return d
}

// client records a client I/O on drive id starting now; call the returned
// function when it ends.
func (g *ioGate) client(id placement.DriveID) func() {
	g.mu.Lock()
	g.driveLocked(id).client++
	g.mu.Unlock()
	return func() {
		g.mu.Lock()
		d := g.driveLocked(id)
		d.client--
		d.clientAt = time.Now()
		g.mu.Unlock()
	}
}

// quietLocked is how long after its last client I/O a drive counts as idle.
func (g *ioGate) quietLocked() time.Duration {
	return min(max(idleAfter*g.svc, minIdle), maxIdle)
}

// admitLocked reports whether a rebuild I/O may start on d at now, and if
// not, how long until the answer may change without a wake-up. The rule is
// recovery.GateAdmit, which the rebuild simulation (internal/plan) runs too.
func (g *ioGate) admitLocked(d *gateDrive, now time.Time, share float64) (bool, time.Duration) {
	quiet := g.quietLocked()
	busy := d.client > 0 || now.Sub(d.clientAt) < quiet
	at := time.Duration(now.UnixNano())
	gd := recovery.GateDrive{Busy: busy, InFlight: d.rebuild, Started: unixTime(d.started), Ended: unixTime(d.ended)}
	ok, next := recovery.GateAdmit(gd, at, g.svc, share)
	if ok || next == 0 {
		return ok, quiet
	}
	return false, min(next-at, quiet)
}

// unixTime is t as the gate rule's clock time; never (the zero time) is
// the Unix epoch, before every slot.
func unixTime(t time.Time) time.Duration {
	if t.IsZero() {
		return 0
	}
	return time.Duration(t.UnixNano())
}

// acquire waits until drive id may take one more rebuild I/O of a task at
// share (see ReconstructArgs.Share) and returns the function that ends it.
// It returns ctx.Err() if ctx ends first.
func (g *ioGate) acquire(ctx context.Context, id placement.DriveID, share float64) (func(), error) {
	for {
		g.mu.Lock()
		d := g.driveLocked(id)
		ok, wait := g.admitLocked(d, time.Now(), share)
		if ok {
			d.rebuild++
			d.started = time.Now()
			// Only an I/O that queues behind nothing but rebuild I/O
			// measures the drive's service time.
			others := d.rebuild - 1
			if d.client > 0 {
				others = -1
			}
			g.mu.Unlock()
			start := time.Now()
			return func() { g.release(id, start, others) }, nil
		}
		wake := d.wake
		g.mu.Unlock()
		t := time.NewTimer(max(wait, time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// release ends a rebuild I/O that started at start with others more
// rebuild I/Os in flight on its drive (it queued behind them, so its
// service time is about its duration divided by others+1), or, if others
// is negative, behind client I/O (its duration says nothing of the
// service time).
func (g *ioGate) release(id placement.DriveID, start time.Time, others int) {
	dur := time.Since(start)
	g.mu.Lock()
	defer g.mu.Unlock()
	d := g.driveLocked(id)
	d.rebuild--
	d.ended = time.Now()
	if others >= 0 {
		svc := dur / time.Duration(others+1)
		if g.svc == 0 {
			g.svc = svc
		} else {
			g.svc += (svc - g.svc) / 16
		}
	}
	close(d.wake)
	d.wake = make(chan struct{})
}
