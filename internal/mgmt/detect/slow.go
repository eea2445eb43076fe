package detect

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"poolfs/internal/placement"
)

// Policy says when a drive is flagged as slow and when a slow drive is
// treated as down, from the latency of its probes (one per drive per
// health pass). The zero value is not valid; start from DefaultPolicy.
type Policy struct {
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
	// DownAfter, which counts as that long; a flagged drive's probe that
	// long is slow whatever its peers' latency. Default 2s.
	DownAfter time.Duration
}

// MaxDownAfter is the most a probe may be given, and so the longest
// DownAfter a valid Policy sets.
const MaxDownAfter = 10 * time.Second

// DefaultPolicy returns the defaults documented on Policy.
func DefaultPolicy() Policy {
	return Policy{Floor: 50 * time.Millisecond, Factor: 10, Probes: 3, DownAfter: 2 * time.Second}
}

// Validate rejects a policy that would flag healthy drives or never act.
func (p Policy) Validate() error {
	switch {
	case p.Floor <= 0:
		return fmt.Errorf("mgmt: slow drive floor %v: want > 0", p.Floor)
	case p.Factor < 2:
		return fmt.Errorf("mgmt: slow drive factor %g: want >= 2", p.Factor)
	case p.Probes < 1:
		return fmt.Errorf("mgmt: slow drive probes %d: want >= 1", p.Probes)
	case p.DownAfter <= p.Floor || p.DownAfter > MaxDownAfter:
		return fmt.Errorf("mgmt: slow drive down-after %v: want between the floor %v and %v", p.DownAfter, p.Floor, MaxDownAfter)
	}
	return nil
}

// Verdict is what one probe's latency changes for its drive.
type Verdict int

const (
	Same    Verdict = iota // nothing changes
	Flagged                // just flagged slow
	Cleared                // just cleared
	Down                   // flagged and past DownAfter long enough: mark down
)

// Slow applies a Policy to probe latencies. It is safe for concurrent
// use.
type Slow struct {
	p  Policy
	mu struct {
		sync.Mutex
		drives map[placement.DriveID]*slowState
	}
}

// slowState is one drive's record, guarded by Slow.mu.
type slowState struct {
	smoothed    time.Duration // of its probes
	n           int
	over, under int // consecutive slow / normal probes
	past        int // consecutive probes of DownAfter or more
	slow        bool
	bound       time.Duration // the bound of its last probe
	kept        bool          // kept up for its pool's width (MarkKept), said once
}

// NewSlow returns a judge applying p, which the caller validated.
func NewSlow(p Policy) *Slow {
	d := &Slow{p: p}
	d.mu.drives = map[placement.DriveID]*slowState{}
	return d
}

// Policy returns the policy d applies.
func (d *Slow) Policy() Policy { return d.p }

// Observe records that a probe of drive id took lat and returns what
// changes for the drive.
func (d *Slow) Observe(id placement.DriveID, lat time.Duration) Verdict {
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
	// A flagged drive's probe given up (DownAfter) is slow even when its
	// peers have slowed too (a loaded host): otherwise the drive, down
	// and still not answering in time, would be cleared, marked up and
	// flagged again. It does not flag a drive no slower than its peers.
	if lat > st.bound || (st.slow && lat >= d.p.DownAfter) {
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
		return Flagged
	case st.slow && st.under >= d.p.Probes:
		st.slow, st.past = false, 0
		return Cleared
	case st.slow && st.past >= d.p.Probes:
		return Down
	}
	return Same
}

// boundLocked is the latency above which a probe of id is slow.
func (d *Slow) boundLocked(id placement.DriveID) time.Duration {
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

// Desc reports whether drive id is flagged, and if so describes its
// latency against its peers' (for status and events).
func (d *Slow) Desc(id placement.DriveID) (string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := d.mu.drives[id]
	if st == nil || !st.slow {
		return "", false
	}
	return fmt.Sprintf("slow: probes take %v, slow above %v", st.smoothed.Round(time.Millisecond), st.bound.Round(time.Millisecond)), true
}

// Latency is the smoothed latency of drive id's probes (0: none yet).
func (d *Slow) Latency(id placement.DriveID) time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	if st := d.mu.drives[id]; st != nil {
		return st.smoothed
	}
	return 0
}

// Forget drops a drive's record (it left the map's up and down drives).
func (d *Slow) Forget(id placement.DriveID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.mu.drives, id)
}

// MarkKept records that drive id was kept up for its pool's width and
// reports whether that is news (not said since it was last flagged).
func (d *Slow) MarkKept(id placement.DriveID) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := d.mu.drives[id]
	if st == nil || st.kept {
		return false
	}
	st.kept = true
	return true
}
