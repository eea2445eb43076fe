package mgmt

import (
	"context"
	"errors"
	"time"

	"poolfs/internal/clustermap"
	"poolfs/internal/meta"
	"poolfs/internal/mgmt/rebuild"
	"poolfs/internal/placement"
	"poolfs/internal/recovery"
)

// RebuildStatus is the rebuild coordinator's view of recovery (package
// rebuild). Service.Rebuild returns the sum over the pools, with each
// pool's own in Pools.
type RebuildStatus = rebuild.Status

// LostFile is a file that lost data (recovery.LostFile).
type LostFile = recovery.LostFile

// newCoordinator wires the rebuild coordinator (package rebuild) to the
// service: its map, its store (the stripes it scans and restores, and the
// runs under way in blob runsBlob), its storage servers, and its event
// log, which words what the coordinator reports.
func (s *Service) newCoordinator() *rebuild.Coordinator {
	return rebuild.New(rebuild.Deps{
		Maps:    s,
		Store:   s.store,
		Servers: rebuildServers{s},
		Runs:    blobRuns[rebuild.Record]{s.store, runsBlob},
		Events:  rebuildEvents{s},
		Log:     s.log,
	})
}

// RunCoordinator runs rebuild and rebalance until ctx ends
// (rebuild.Coordinator.Run), and the scrub pass a previous coordinator
// left under way: a scrub runs no longer than its coordinator, and the
// next one carries it on.
func (s *Service) RunCoordinator(ctx context.Context, interval time.Duration) {
	defer s.haltScrub()
	s.resumeScrub(ctx)
	s.rb.Run(ctx, interval)
}

// kickRebuild wakes the coordinator (drive states changed).
func (s *Service) kickRebuild() { s.rb.Kick() }

// Rebuild returns the coordinator's status: the sum over the pools, and
// each pool's in Pools (in pool ID order).
func (s *Service) Rebuild() RebuildStatus { return s.rb.Status() }

// Scan reads the committed stripes of every PG of a pool, in PG order
// (rebuild.Coordinator.Scan).
func (s *Service) Scan(ctx context.Context, pool *clustermap.Pool) ([]recovery.Stripe, []meta.StripeRec, error) {
	return s.rb.Scan(ctx, pool)
}

// PlanInput builds the planner input of a pool at map m.
func PlanInput(m *clustermap.Map, pool *clustermap.Pool, stripes []recovery.Stripe) (recovery.Input, error) {
	return rebuild.PlanInput(m, pool, stripes)
}

// Runs under way are kept in the metadata store (blob rebuild.runs: the
// kind and start of each pool's run), so that a management service that
// takes over (Lead) carries on the run of the one it replaces: its status
// shows the run's start, no second start event is raised, and the end
// event counts the whole run.
const runsBlob = "rebuild.runs"

// rebuildServers reaches the service's storage servers, if it has any.
type rebuildServers struct{ s *Service }

func (r rebuildServers) Server(m *clustermap.Map, id placement.DriveID) (rebuild.Server, error) {
	if r.s.servers == nil {
		return nil, errors.New("mgmt: cannot reach storage servers to rebuild")
	}
	sc, err := r.s.servers.Server(m, id)
	if err != nil {
		return nil, err
	}
	return sc, nil
}

// rebuildEvents writes what the coordinator reports to the event log.
type rebuildEvents struct{ s *Service }

func (e rebuildEvents) Event(ctx context.Context, kind, subject, msg string, dur time.Duration) {
	e.s.event(ctx, kind, subject, msg, dur)
}

func (e rebuildEvents) Lost(ctx context.Context, lost map[uint64][]uint64) []recovery.LostFile {
	return e.s.lostFileEvents(ctx, lost, "inode %d lost stripes %v: more fragments gone than parity covers")
}

var (
	_ rebuild.Runs    = blobRuns[rebuild.Record]{}
	_ rebuild.Servers = rebuildServers{}
	_ rebuild.Events  = rebuildEvents{}
	_ rebuild.Store   = (*meta.Store)(nil)
)
