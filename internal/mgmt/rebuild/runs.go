package rebuild

import (
	"context"
	"fmt"
	"strconv"
)

// Runs keeps the record of each pool's run under way, by pool ID in
// decimal, so that the coordinator of the service that leads next carries
// it on (Resume).
type Runs interface {
	// Load returns every stored record.
	Load(ctx context.Context) (map[string]Record, error)
	// Set stores pool's record, or removes it (del).
	Set(ctx context.Context, pool string, r Record, del bool) error
}

// Record is one pool's run under way; the zero value is none. The work
// itself needs no record: every restored stripe is committed as its task
// completes, so the next pass plans only what is still missing.
type Record struct {
	Kind    string `json:"kind"`
	Started int64  `json:"started"` // unix ns
}

// saveRun records pool's run (the zero record: none); a failure is
// logged: it costs only the continuity of the run's status.
func (c *Coordinator) saveRun(ctx context.Context, pool uint32, r Record) {
	err := c.d.Runs.Set(ctx, strconv.FormatUint(uint64(pool), 10), r, r == Record{})
	if err != nil && ctx.Err() == nil {
		c.d.Log.Warn("record rebuild run", "pool", pool, "err", err)
	}
}

// Resume marks the stored runs active, as this coordinator's own: its
// status shows each run's kind and start, no second start event is
// raised, and the next pass finishes them or carries them on. A run this
// coordinator had before (it stood by since) and that is no longer stored
// is no longer active.
func (c *Coordinator) Resume(ctx context.Context) error {
	runs, err := c.d.Runs.Load(ctx)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, pr := range c.mu.pools { // a run this service had before it stood by may have ended since
		if _, ok := runs[strconv.FormatUint(uint64(id), 10)]; !ok {
			pr.st.Active = false
		}
	}
	for key, r := range runs {
		id, err := strconv.ParseUint(key, 10, 32)
		if err != nil {
			return fmt.Errorf("rebuild: stored run of pool %q", key)
		}
		pr := c.poolLocked(uint32(id))
		pr.st.Active, pr.st.Kind, pr.st.Started = true, r.Kind, r.Started
	}
	return nil
}
