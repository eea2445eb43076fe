package clustermap

import (
	"fmt"
	"sort"
	"time"

	"poolfs/internal/placement"
)

// The drive state machine. A drive is born Up. It goes Down when it stops
// answering (its server restarting, a cable pulled): its fragments are then
// unavailable but not lost, so nothing is rebuilt; new stripes avoid it.
// From Down it comes back Up (then the stripes written meanwhile are moved
// back onto it) or, past its pool's grace period, it is declared Failed and
// rebuilt. Failed is final for the drive's data; the operator takes a drive
// Out by replacing it.
//
//	up ──unreachable──▶ down ──answers──▶ up
//	 │                   │
//	 │ I/O errors,       │ grace expired
//	 ▼ operator          ▼
//	failed ◀─────────────┘        any ──replace──▶ out
//
// The functions here are pure: the caller passes the time.

// DefaultDownGrace is the grace period of a pool that sets none: ten
// minutes, as Ceph's mon_osd_down_out_interval. Long enough for a server
// reboot or a re-seated cable, short enough that a dead drive is rebuilt
// soon.
const DefaultDownGrace = 10 * time.Minute

// MaxDownGrace bounds Pool.DownGrace.
const MaxDownGrace = 30 * 24 * time.Hour

// ErrTransition is returned for a state change the state machine forbids.
var ErrTransition = fmt.Errorf("%w: drive state change not allowed", ErrInvalid)

// Grace returns how long a drive of the pool may stay Down before it is
// declared failed.
func (p *Pool) Grace() time.Duration {
	if p.DownGrace <= 0 {
		return DefaultDownGrace
	}
	return p.DownGrace
}

// ParseDownGrace parses a grace period such as "10m" or "90s": between one
// second and MaxDownGrace.
func ParseDownGrace(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil || d < time.Second || d > MaxDownGrace {
		return 0, fmt.Errorf("%w: down grace %q: want a duration from 1s to %v, e.g. 10m", ErrInvalid, s, MaxDownGrace)
	}
	return d, nil
}

// SetState moves drive id to state to at time now, or returns an error
// wrapping ErrTransition (ErrNoDrive for an unknown drive). changed is false
// when the drive already was in that state (not an error). Allowed: up →
// down, failed; down → up, failed; rebuilding → failed, up; any → out.
// DownSince is set on entering Down and cleared on leaving it.
func (m *Map) SetState(id placement.DriveID, to DriveState, now time.Time) (changed bool, err error) {
	d, err := m.Drive(id)
	if err != nil {
		return false, err
	}
	if d.State == to {
		return false, nil
	}
	ok := false
	switch to {
	case StateDown:
		ok = d.State == StateUp
	case StateUp:
		ok = d.State == StateDown || d.State == StateRebuilding
	case StateFailed:
		ok = d.State == StateUp || d.State == StateDown || d.State == StateRebuilding
	case StateOut:
		ok = true
	}
	if !ok {
		return false, fmt.Errorf("%w: drive %v from %s to %s", ErrTransition, id, d.State, to)
	}
	d.State, d.DownSince = to, 0
	if to == StateDown {
		d.DownSince = now.UnixNano()
	}
	return true, nil
}

// GraceLeft returns how long drive id may still stay Down at time now
// before it is declared failed (at most its pool's grace, never negative),
// and false if the drive is not Down.
func (m *Map) GraceLeft(id placement.DriveID, now time.Time) (time.Duration, bool) {
	d, err := m.Drive(id)
	if err != nil || d.State != StateDown {
		return 0, false
	}
	grace := DefaultDownGrace
	if p, err := m.Pool(d.Pool); err == nil {
		grace = p.Grace()
	}
	left := grace - now.Sub(time.Unix(0, d.DownSince))
	return min(max(left, 0), grace), true
}

// DownExpired returns, in ID order, the Down drives whose grace has run out
// at time now: they are to be declared failed.
func (m *Map) DownExpired(now time.Time) []placement.DriveID {
	var out []placement.DriveID
	for _, d := range m.Drives {
		if left, down := m.GraceLeft(d.ID, now); down && left == 0 {
			out = append(out, d.ID)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// RecordSpares stores in every grouped pool the hot spare assignments that
// its placement makes at this map's drive states, starting from the
// assignments recorded before (see placement.Pool.SpareFor). The map
// authority calls it on every new epoch, so that an assignment, once made,
// sticks until its group drive comes back or its spare fails.
func (m *Map) RecordSpares() error {
	for i := range m.Pools {
		p := &m.Pools[i]
		if p.Layout != placement.Grouped {
			continue
		}
		pp, err := m.Placement(p.ID)
		if err != nil {
			return err
		}
		pl, err := pp.Placer()
		if err != nil {
			return fmt.Errorf("placement of pool %q: %w", p.Name, err)
		}
		p.HotSpareFor = pl.SpareFor()
		if len(p.HotSpareFor) == 0 {
			p.HotSpareFor = nil
		}
	}
	return nil
}
