package mgmt

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"poolfs/internal/clustermap"
	"poolfs/internal/placement"
)

// Events of drives much slower than their peers.
const (
	EventDriveSlow        = "drive.slow"         // latency far above its peers': flagged
	EventDriveSlowCleared = "drive.slow-cleared" // back among its peers
)

// SlowPolicy says when the failure detector flags a drive as slow and when
// it treats a slow drive as down, from the latency of its probes (one per
// drive per health pass). The zero value is not valid; start from
// DefaultSlowPolicy.
type SlowPolicy struct {
	// A probe is slow when it takes longer than max(Floor, Factor × the
	// median of the other drives' smoothed probe latency). Defaults 50ms
	// and 10.
	Floor  time.Duration
	Factor float64
	// Probes consecutive slow probes flag a drive (event drive.slow), as
	// many consecutive normal ones clear it (drive.slow-cleared). Default 3.
	Probes int
	// DownAfter: a flagged drive whose probes take DownAfter or longer,
	// Probes times in a row, is marked down (the grace period then
	// applies: it is failed and rebuilt if it stays so), and is marked up
	// again only once it is no longer slow. Probes are given up after
	// DownAfter, which counts as that long. Default 2s.
	DownAfter time.Duration
}

// DefaultSlowPolicy returns the defaults documented on SlowPolicy.
func DefaultSlowPolicy() SlowPolicy {
	return SlowPolicy{Floor: 50 * time.Millisecond, Factor: 10, Probes: 3, DownAfter: 2 * time.Second}
}

// Validate rejects a policy that would flag healthy drives or never act.
func (p SlowPolicy) Validate() error {
	switch {
	case p.Floor <= 0:
		return fmt.Errorf("mgmt: slow drive floor %v: want > 0", p.Floor)
	case p.Factor < 2:
		return fmt.Errorf("mgmt: slow drive factor %g: want >= 2", p.Factor)
	case p.Probes < 1:
		return fmt.Errorf("mgmt: slow drive probes %d: want >= 1", p.Probes)
	case p.DownAfter <= p.Floor || p.DownAfter > probeTimeout:
		return fmt.Errorf("mgmt: slow drive down-after %v: want between the floor %v and %v", p.DownAfter, p.Floor, probeTimeout)
	}
	return nil
}

// slowVerdict is what one probe's latency changes for its drive.
type slowVerdict int

const (
	slowSame    slowVerdict = iota
	slowFlagged             // just flagged slow
	slowCleared             // just cleared
	slowDown                // flagged and past DownAfter long enough: mark down
)

// slowDetector applies a SlowPolicy to probe latencies. It has no clock and
// does no I/O; it is safe for concurrent use.
type slowDetector struct {
	p  SlowPolicy
	mu struct {
		sync.Mutex
		drives map[placement.DriveID]*slowState
	}
}

// slowState is one drive's record, guarded by slowDetector.mu.
type slowState struct {
	smoothed    time.Duration // of its probes
	n           int
	over, under int // consecutive slow / normal probes
	past        int // consecutive probes of DownAfter or more
	slow        bool
	bound       time.Duration // the bound of its last probe
	kept        bool          // kept up for its pool's width (slowDriveDown), said once
}

func newSlowDetector(p SlowPolicy) *slowDetector {
	d := &slowDetector{p: p}
	d.mu.drives = map[placement.DriveID]*slowState{}
	return d
}

// observe records that a probe of drive id took lat and returns what
// changes for the drive.
func (d *slowDetector) observe(id placement.DriveID, lat time.Duration) slowVerdict {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := d.mu.drives[id]
	if st == nil {
		st = &slowState{}
		d.mu.drives[id] = st
	}
	if st.n == 0 {
		st.smoothed = lat
	} else {
		st.smoothed += (lat - st.smoothed) / 4
	}
	st.n++
	st.bound = d.boundLocked(id)
	if lat > st.bound {
		st.over, st.under = st.over+1, 0
	} else {
		st.over, st.under = 0, st.under+1
	}
	if lat >= d.p.DownAfter {
		st.past++
	} else {
		st.past = 0
	}
	switch {
	case !st.slow && st.over >= d.p.Probes:
		st.slow, st.kept = true, false
		return slowFlagged
	case st.slow && st.under >= d.p.Probes:
		st.slow, st.past = false, 0
		return slowCleared
	case st.slow && st.past >= d.p.Probes:
		return slowDown
	}
	return slowSame
}

// boundLocked is the latency above which a probe of id is slow.
func (d *slowDetector) boundLocked(id placement.DriveID) time.Duration {
	var peers []time.Duration
	for pid, st := range d.mu.drives {
		if pid != id && st.n > 0 {
			peers = append(peers, st.smoothed)
		}
	}
	if len(peers) == 0 {
		return max(d.p.Floor, d.p.DownAfter) // no peers to compare with
	}
	slices.Sort(peers)
	return max(d.p.Floor, time.Duration(d.p.Factor*float64(peers[len(peers)/2])))
}

// slowDesc reports whether drive id is flagged, and if so describes its
// latency against its peers' (for status and events).
func (d *slowDetector) slowDesc(id placement.DriveID) (string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := d.mu.drives[id]
	if st == nil || !st.slow {
		return "", false
	}
	return fmt.Sprintf("slow: probes take %v, slow above %v", st.smoothed.Round(time.Millisecond), st.bound.Round(time.Millisecond)), true
}

// latency is the smoothed latency of drive id's probes (0: none yet).
func (d *slowDetector) latency(id placement.DriveID) time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	if st := d.mu.drives[id]; st != nil {
		return st.smoothed
	}
	return 0
}

// forget drops a drive's record (it left the map's up and down drives).
func (d *slowDetector) forget(id placement.DriveID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.mu.drives, id)
}

// SetSlowPolicy sets when drives are flagged slow and treated as down. Call
// it before the service is used.
func (s *Service) SetSlowPolicy(p SlowPolicy) error {
	if err := p.Validate(); err != nil {
		return err
	}
	s.slow = newSlowDetector(p)
	return nil
}

// probeLatency feeds the latency of a probe of drive id (err its result) to
// the slow detector and writes the events of what changed. A probe that
// failed outright says nothing about speed; one given up at its deadline
// counts as DownAfter. It returns whether the drive is to be marked down.
func (s *Service) probeLatency(ctx context.Context, id placement.DriveID, lat time.Duration, err error) (down bool) {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		lat = max(lat, s.slow.p.DownAfter)
	case err != nil:
		return false
	}
	switch s.slow.observe(id, lat) {
	case slowFlagged:
		desc, _ := s.slow.slowDesc(id)
		s.event(ctx, EventDriveSlow, id.String(), desc, lat)
	case slowCleared:
		s.event(ctx, EventDriveSlowCleared, id.String(), fmt.Sprintf("probes take %v again, like its peers'", lat.Round(time.Millisecond)), lat)
	case slowDown:
		return true
	}
	return false
}

// errKeptForWidth: a slow drive stays up, its pool could not place whole
// stripes without it.
var errKeptForWidth = errors.New("kept up: its pool would have fewer up drives than a stripe's width")

// slowDriveDown marks a drive that is too slow down, unless that would
// leave its pool fewer up drives than a stripe's width (k+m): writes
// would then fail or go without full redundancy, which is worse than
// slow. Probes of drives that share one overloaded disk (`poolfs up`
// on a busy machine) are slow together, and marking them down one after
// another took pools below their width. The first time a drive is kept
// up this way an event says so; it goes down once the pool can spare it.
func (s *Service) slowDriveDown(ctx context.Context, id placement.DriveID) error {
	desc, _ := s.slow.slowDesc(id)
	var pool clustermap.Pool
	var up int
	err := s.driveDown(ctx, id, fmt.Sprintf("too slow (%s, down after %v)", desc, s.slow.p.DownAfter),
		func(m *clustermap.Map, d clustermap.Drive) error {
			p, err := m.Pool(d.Pool)
			if err != nil {
				return nil // not in a pool: nothing to keep
			}
			pool, up = *p, 0
			for _, pid := range p.Drives {
				if pd, err := m.Drive(pid); err == nil && pd.State == clustermap.StateUp {
					up++
				}
			}
			if up-1 < p.K+p.M {
				return errKeptForWidth
			}
			return nil
		})
	if !errors.Is(err, errKeptForWidth) {
		return err
	}
	if s.slow.markKept(id) {
		s.event(ctx, EventDriveSlow, id.String(), fmt.Sprintf("%s; %v: pool %s has %d up drives for %d+%d stripes",
			desc, errKeptForWidth, pool.Name, up, pool.K, pool.M), 0)
	}
	return nil
}

// markKept records that drive id was kept up for its pool's width and
// reports whether that is news (not said since it was last flagged).
func (d *slowDetector) markKept(id placement.DriveID) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := d.mu.drives[id]
	if st == nil || st.kept {
		return false
	}
	st.kept = true
	return true
}
