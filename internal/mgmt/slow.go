package mgmt

import (
	"context"
	"errors"
	"fmt"
	"time"

	"poolfs/internal/clustermap"
	"poolfs/internal/mgmt/detect"
	"poolfs/internal/placement"
)

// Events of drives much slower than their peers.
const (
	EventDriveSlow        = "drive.slow"         // latency far above its peers': flagged
	EventDriveSlowCleared = "drive.slow-cleared" // back among its peers
)

// SlowPolicy says when the failure detector flags a drive as slow and when
// it treats a slow drive as down (detect.Policy).
type SlowPolicy = detect.Policy

// DefaultSlowPolicy returns the defaults documented on detect.Policy.
func DefaultSlowPolicy() SlowPolicy { return detect.DefaultPolicy() }

// SetSlowPolicy sets when drives are flagged slow and treated as down. Call
// it before the service is used.
func (s *Service) SetSlowPolicy(p SlowPolicy) error {
	if err := p.Validate(); err != nil {
		return err
	}
	s.slow = detect.NewSlow(p)
	return nil
}

// probeLatency feeds the latency of a probe of drive id (err its result) to
// the slow-drive judge (package detect) and writes the events of what changed. A probe that
// failed outright says nothing about speed; one given up at its deadline
// counts as DownAfter. It returns whether the drive is to be marked down.
func (s *Service) probeLatency(ctx context.Context, id placement.DriveID, lat time.Duration, err error) (down bool) {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		lat = max(lat, s.slow.Policy().DownAfter)
	case err != nil:
		return false
	}
	switch s.slow.Observe(id, lat) {
	case detect.Flagged:
		desc, _ := s.slow.Desc(id)
		s.event(ctx, EventDriveSlow, id.String(), desc, lat)
	case detect.Cleared:
		s.event(ctx, EventDriveSlowCleared, id.String(), fmt.Sprintf("probes take %v again, like its peers'", lat.Round(time.Millisecond)), lat)
	case detect.Down:
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
	desc, _ := s.slow.Desc(id)
	var pool clustermap.Pool
	var up int
	err := s.driveDown(ctx, id, fmt.Sprintf("too slow (%s, down after %v)", desc, s.slow.Policy().DownAfter),
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
	if s.slow.MarkKept(id) {
		s.event(ctx, EventDriveSlow, id.String(), fmt.Sprintf("%s; %v: pool %s has %d up drives for %d+%d stripes",
			desc, errKeptForWidth, pool.Name, up, pool.K, pool.M), 0)
	}
	return nil
}
