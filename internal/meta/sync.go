package meta

import "context"

// Syncer is an optional Engine capability: an engine whose commits may be
// deferred (not yet durable when Update returns) makes them durable in
// Sync. Engines without it are durable at every commit.
type Syncer interface {
	Sync(ctx context.Context) error
}

// Sync makes every change committed before the call durable. It is what
// fsync of a file or directory means for metadata, and what the garbage
// collector waits for before deleting the fragments that a commit
// replaced.
func (s *Store) Sync(ctx context.Context) error {
	if sy, ok := s.e.(Syncer); ok {
		return sy.Sync(ctx)
	}
	return nil
}
