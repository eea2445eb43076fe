package mgmt

import (
	"context"
	"fmt"
	"strconv"
)

// Runs under way are kept in the metadata store (blob rebuild.runs: the
// kind and start of each pool's run), so that a management service that
// takes over (Lead) carries on the run of the one it replaces: its status
// shows the run's start, no second start event is raised, and the end
// event counts the whole run. The work itself needs no record: every
// restored stripe is committed as its task completes, so the next leader's
// first pass plans only what is still missing.
const runsBlob = "rebuild.runs"

// runRecord is one pool's run under way; the zero value is none.
type runRecord struct {
	Kind    string `json:"kind"`
	Started int64  `json:"started"` // unix ns
}

// loadRuns reads the stored runs.
func (s *Service) loadRuns(ctx context.Context) (map[string]runRecord, uint64, error) {
	return loadBlobMap[runRecord](ctx, s.store, runsBlob)
}

// saveRun records pool's run (the zero record: none); a failure is
// logged: it costs only the continuity of the run's status.
func (s *Service) saveRun(ctx context.Context, pool uint32, r runRecord) {
	err := setBlobMapEntry(ctx, s.store, runsBlob, strconv.FormatUint(uint64(pool), 10), r, r == runRecord{})
	if err != nil && ctx.Err() == nil {
		s.log.Warn("record rebuild run", "pool", pool, "err", err)
	}
}

// resumeRuns marks the stored runs active in the coordinator, as their
// own: the next pass finishes them or carries them on.
func (s *Service) resumeRuns(ctx context.Context) error {
	runs, _, err := s.loadRuns(ctx)
	if err != nil {
		return err
	}
	co := s.coord()
	co.mu.Lock()
	defer co.mu.Unlock()
	for id, pr := range co.mu.pools { // a run this service had before it stood by may have ended since
		if _, ok := runs[strconv.FormatUint(uint64(id), 10)]; !ok {
			pr.st.Active = false
		}
	}
	for key, r := range runs {
		id, err := strconv.ParseUint(key, 10, 32)
		if err != nil {
			return fmt.Errorf("mgmt: stored %s: pool %q", runsBlob, key)
		}
		pr := co.poolLocked(uint32(id))
		pr.st.Active, pr.st.Kind, pr.st.Started = true, r.Kind, r.Started
	}
	return nil
}
