package storage

import (
	"context"
	"fmt"
	"sync"
	"time"

	"poolfs/internal/chunkstore"
	"poolfs/internal/clustermap"
	"poolfs/internal/erasure"
	"poolfs/internal/placement"
)

// writeLimits holds the most bytes client writes may fill each served drive
// to (clustermap.Map.WriteLimits), the client bytes being written to each
// now, so that concurrent writes cannot pass the limit together, and each
// drive's usage as last asked plus the client writes since. Rebuild and
// resync writes (Reconstruct) are not limited: the room between a drive's
// limit and its capacity is theirs.
type writeLimits struct {
	mu      sync.Mutex
	limit   map[placement.DriveID]int64 // none: no limit
	pending map[placement.DriveID]int64
	used    map[placement.DriveID]usedAt
}

type usedAt struct {
	n   int64
	cap int64 // the drive's capacity
	at  time.Time
}

// usedFresh is how long a drive's usage is trusted while writes stay more
// than 1/64 of the limit below it; closer, every client write asks the
// drive (rebuild writes and deletes since are not in the cached figure).
const usedFresh = time.Second

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
		s.limits.used = map[placement.DriveID]usedAt{}
	}
	s.limits.mu.Unlock()
	return nil
}

// clientWrite writes a client's fragment to served drive d (id) if the
// drive stays within its client write limit, else fails with an error
// wrapping chunkstore.ErrFull (the client reports the pool full). A write
// that replaces generation replaces (> 0, older than key's) of the same
// fragment, which d still holds, may go past the limit up to the
// allowance of replace.go.
func (s *Server) clientWrite(ctx context.Context, id placement.DriveID, d chunkstore.Drive, key erasure.FragmentKey, replaces uint64, frag []byte) error {
	size := int64(len(frag))
	l := &s.limits
	l.mu.Lock()
	limit, limited := l.limit[id]
	if !limited {
		l.mu.Unlock()
		return d.WriteFragment(ctx, key, frag)
	}
	u, ok := l.used[id]
	if !ok || time.Since(u.at) >= usedFresh || u.n+l.pending[id]+size > limit-limit/64 {
		l.mu.Unlock()
		st, err := d.Stat(ctx)
		if err != nil {
			return err
		}
		l.mu.Lock()
		u = usedAt{n: st.Used, cap: st.Capacity, at: time.Now()}
		l.used[id] = u
	}
	pending := l.pending[id]
	if over := u.n + pending + size; over > limit {
		// u was just asked of the drive: over > limit-limit/64.
		allowed := limit + max(u.cap-limit, 0)/replaceAllowance
		if over <= allowed && replaces > 0 && replaces < key.Gen {
			l.pending[id] = pending + size // held while looking the old fragment up
			l.mu.Unlock()
			err := holds(ctx, d, erasure.FragmentKey{Ino: key.Ino, Stripe: key.Stripe, Gen: replaces, Index: key.Index})
			if err == nil {
				return s.finishClientWrite(ctx, id, d, key, frag)
			}
			l.mu.Lock()
			l.pending[id] -= size
			l.mu.Unlock()
			return fmt.Errorf("drive %v: write fragment %v: %w: %d bytes wanted, %d used and %d being written of the %d that client writes may fill, and the generation %x it replaces is not found (%v)",
				id, key, chunkstore.ErrFull, size, u.n, pending, limit, replaces, err)
		}
		l.mu.Unlock()
		return fmt.Errorf("drive %v: write fragment %v: %w: %d bytes wanted, %d used and %d being written of the %d that client writes may fill (the rest is kept for rebuilds)",
			id, key, chunkstore.ErrFull, size, u.n, pending, limit)
	}
	l.pending[id] = pending + size
	l.mu.Unlock()
	return s.finishClientWrite(ctx, id, d, key, frag)
}

// finishClientWrite writes an admitted fragment, whose size clientWrite
// added to the drive's pending bytes, and moves it to the drive's usage.
func (s *Server) finishClientWrite(ctx context.Context, id placement.DriveID, d chunkstore.Drive, key erasure.FragmentKey, frag []byte) error {
	size := int64(len(frag))
	l := &s.limits
	err := d.WriteFragment(ctx, key, frag)
	l.mu.Lock()
	l.pending[id] -= size
	if u, ok := l.used[id]; ok && err == nil {
		u.n += size
		l.used[id] = u
	}
	l.mu.Unlock()
	return err
}

// holds reports nil if d holds fragment key (it reads its first Align
// bytes, the header), an error wrapping chunkstore.ErrNotFound if not.
func holds(ctx context.Context, d chunkstore.Drive, key erasure.FragmentKey) error {
	_, err := d.ReadFragment(ctx, key, 0, erasure.Align, nil)
	return err
}
