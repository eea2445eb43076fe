package mgmt

import (
	"context"

	"poolfs/internal/clustermap"
	"poolfs/internal/mgmt/gc"
	"poolfs/internal/placement"
)

// GCArgs selects what one collector run does (package gc).
type GCArgs = gc.Args

// GCReport says what a collector run removed (package gc).
type GCReport = gc.Report

// newCollector wires the fragment collector (package gc) to the service:
// its store, its drives as they are when a run asks, its map, and its
// integrity state as the guard of every deletion.
func (s *Service) newCollector() *gc.Collector {
	return gc.New(gc.Deps{
		Store: s.store,
		Drives: gc.DrivesFunc(func(m *clustermap.Map, id placement.DriveID) (gc.Drive, error) {
			return s.drives.Drive(m, id)
		}),
		Maps:  s,
		Guard: gcGuard{s},
		Log:   s.log,
	})
}

// GC runs the collector once (gc.Collector.Run): the queue of replaced and
// removed generations, then (with Orphans) the scan for fragments never
// committed. It deletes nothing once an integrity check found the store
// corrupt (ErrDeletionStopped), and the orphan scan runs only after a full
// integrity check of the store passed (else an error wrapping
// meta.ErrStoreCorrupt).
//
// A pass that deleted fragments sets the pool limits again: they count
// fragments waiting for the collector as used (admission.go), so what it
// freed is room now, not at the next health pass (a writer that found the
// pool full waits for the collector and looks again: client/space.go).
func (s *Service) GC(ctx context.Context, a GCArgs) (*GCReport, error) {
	rep, err := s.gc.Run(ctx, a)
	if err == nil && rep.Fragments > 0 {
		s.UpdatePoolLimits(ctx)
	}
	return rep, err
}

// gcGuard is the collector's view of the service's integrity state
// (integrity.go).
type gcGuard struct{ s *Service }

func (g gcGuard) Stopped() error                   { return g.s.deletionStopped() }
func (g gcGuard) Verify(ctx context.Context) error { return g.s.CheckStore(ctx, true) }

var _ gc.Guard = gcGuard{}
