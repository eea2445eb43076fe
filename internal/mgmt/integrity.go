package mgmt

import (
	"context"
	"errors"
	"fmt"

	"poolfs/internal/meta"
)

// EventMetaCorrupt is raised when an integrity check of the metadata store
// fails; fragment deletion stops with it.
const EventMetaCorrupt = "meta.corrupt"

// ErrDeletionStopped is returned by GC once an integrity check of the
// metadata store has failed: no fragment is deleted on the word of a
// store that may have lost records, until the store is restored or
// rebuilt and the cluster restarted. A management service that leads
// after the one that found it (Lead) stops deletion too.
var ErrDeletionStopped = errors.New("mgmt: fragment deletion stopped")

// CheckStore runs the metadata store's integrity check (full: the complete
// one). If the store is corrupt it stops fragment deletion for the life of
// the service, raises EventMetaCorrupt (once) and returns an error
// wrapping meta.ErrStoreCorrupt. A check that could not run is returned
// as it is and changes nothing.
func (s *Service) CheckStore(ctx context.Context, full bool) error {
	err := s.store.CheckIntegrity(ctx, full)
	if err == nil || !errors.Is(err, meta.ErrStoreCorrupt) {
		return err
	}
	s.integ.Lock()
	first := s.integ.bad == nil
	if first {
		s.integ.bad = err
	}
	s.integ.Unlock()
	if first {
		s.log.Error("metadata store is corrupt: fragment deletion stopped", "err", err)
		// A service that leads after this one stops deletion too (loadStopped).
		if _, perr := s.store.PutBlob(ctx, stoppedBlob, []byte(err.Error()), 0); perr != nil && !errors.Is(perr, meta.ErrConflict) {
			s.log.Error("record that fragment deletion stopped", "err", perr)
		}
		// The event goes to the same store; it may fail to commit.
		s.event(ctx, EventMetaCorrupt, "meta", err.Error()+"; fragment deletion stopped", 0)
	}
	return err
}

// deletionStopped returns a non-nil error once CheckStore found the store
// corrupt.
func (s *Service) deletionStopped() error {
	s.integ.Lock()
	defer s.integ.Unlock()
	if s.integ.bad != nil {
		return fmt.Errorf("%w: %w", ErrDeletionStopped, s.integ.bad)
	}
	return nil
}

// stoppedBlob records, in the metadata store, the failed check that
// stopped fragment deletion, for the services that lead after this one; it
// goes with the store when the store is restored or rebuilt.
const stoppedBlob = "gc.stopped"

// loadStopped stops fragment deletion if an earlier service found the
// store corrupt (stoppedBlob).
func (s *Service) loadStopped(ctx context.Context) error {
	b, _, err := s.store.GetBlob(ctx, stoppedBlob)
	if errors.Is(err, meta.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	s.integ.Lock()
	if s.integ.bad == nil {
		s.integ.bad = fmt.Errorf("%w: found by an earlier management service: %s", meta.ErrStoreCorrupt, b)
	}
	s.integ.Unlock()
	return nil
}
