// Package jobtest holds the in-memory fakes that the tests of more than
// one management job (internal/mgmt/rebuild, internal/mgmt/scrub) use.
// Nothing outside tests imports it.
package jobtest

import (
	"context"
	"maps"
	"sync"
)

// Runs is an in-memory store of a job's records by pool: the fake of
// rebuild.Runs and scrub.Runs. It is safe for concurrent use.
type Runs[R any] struct {
	mu   sync.Mutex
	recs map[string]R
}

// NewRuns returns an empty store.
func NewRuns[R any]() *Runs[R] { return &Runs[R]{recs: map[string]R{}} }

// Load returns a copy of every record.
func (f *Runs[R]) Load(context.Context) (map[string]R, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.recs), nil
}

// Set stores pool's record, or removes it (del).
func (f *Runs[R]) Set(_ context.Context, pool string, r R, del bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if del {
		delete(f.recs, pool)
	} else {
		f.recs[pool] = r
	}
	return nil
}

// Get returns pool's record, if stored.
func (f *Runs[R]) Get(pool string) (R, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.recs[pool]
	return r, ok
}
