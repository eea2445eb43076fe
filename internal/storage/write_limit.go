package storage

import (
	"context"
	"fmt"
	"sync"

	"poolfs/internal/chunkstore"
	"poolfs/internal/clustermap"
	"poolfs/internal/erasure"
	"poolfs/internal/placement"
)

// writeLimits holds the most bytes client writes may fill each served drive
// to (clustermap.Map.WriteLimits), and the client bytes being written to
// each now, so that concurrent writes cannot pass the limit together.
// Rebuild and resync writes (Reconstruct) are not limited: the room between
// a drive's limit and its capacity is theirs.
type writeLimits struct {
	mu      sync.Mutex
	limit   map[placement.DriveID]int64 // none: no limit
	pending map[placement.DriveID]int64
}

// SetWriteLimits applies the client write limits of every pool of map m.
// The owner of the server calls it with each new map epoch.
func (s *Server) SetWriteLimits(m *clustermap.Map) error {
	limits := map[placement.DriveID]int64{}
	for _, p := range m.Pools {
		l, err := m.WriteLimits(p.ID)
		if err != nil {
			return err
		}
		for id, v := range l {
			limits[id] = v
		}
	}
	s.limits.mu.Lock()
	s.limits.limit = limits
	if s.limits.pending == nil {
		s.limits.pending = map[placement.DriveID]int64{}
	}
	s.limits.mu.Unlock()
	return nil
}

// clientWrite writes a client's fragment to served drive d (id) if the
// drive stays within its client write limit, else fails with an error
// wrapping chunkstore.ErrFull (the client reports the pool full).
func (s *Server) clientWrite(ctx context.Context, id placement.DriveID, d chunkstore.Drive, key erasure.FragmentKey, frag []byte) error {
	size := int64(len(frag))
	s.limits.mu.Lock()
	limit, limited := s.limits.limit[id]
	s.limits.mu.Unlock()
	if limited {
		u, err := d.Stat(ctx)
		if err != nil {
			return err
		}
		s.limits.mu.Lock()
		pending := s.limits.pending[id]
		if u.Used+pending+size > limit {
			s.limits.mu.Unlock()
			return fmt.Errorf("drive %v: write fragment %v: %w: %d bytes wanted, %d used and %d being written of the %d that client writes may fill (the rest is kept for rebuilds)",
				id, key, chunkstore.ErrFull, size, u.Used, pending, limit)
		}
		s.limits.pending[id] = pending + size
		s.limits.mu.Unlock()
		defer func() {
			s.limits.mu.Lock()
			s.limits.pending[id] -= size
			s.limits.mu.Unlock()
		}()
	}
	return d.WriteFragment(ctx, key, frag)
}
