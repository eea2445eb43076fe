package mgmt

import (
	"context"
	"sync"
	"time"

	"poolfs/internal/clustermap"
	"poolfs/internal/erasure"
	"poolfs/internal/placement"
)

// Pool limits (admission). The metadata store refuses a commit that would
// take a pool's usage past its limit, and clients refuse a write(2) whose
// buffered bytes would not fit under it (client.spaceGate), so the limit
// must say what the pool can really still take. That is not the pool's
// usable capacity less its usage: drives fill unevenly, and what stops
// writes is the first drive to reach its client write limit
// (clustermap.Map.WriteLimits), which the storage server enforces. So
// UpdatePoolLimits sets each pool's limit to
//
//	min(usable raw, used + room),  room = (min over up drives (limit − used) − F) × n / balanceMargin × U/F
//
// where n drives share new stripes (placement balances fragment slots
// within ±10%: balanceMargin), F is the fragment of a full stripe unit
// (header included), and U/F converts the fragment bytes drives count to
// the shard bytes the store counts. A drive that cannot take one more
// full fragment would refuse a part of every stripe placed on it, so the
// pool counts as full from then on (writes fail at write(2), before their
// bytes are accepted), not only once the mean is used up. Space not
// yet reclaimed (fragments of deleted or rewritten stripes the collector
// has not removed) is used space on the drives, so it is not room until the
// collector frees it.
const balanceMargin = 1.1

// statTimeout bounds one drive's usage query in UpdatePoolLimits.
const statTimeout = 2 * time.Second

// UpdatePoolLimits sets every pool's limit in the metadata store from its
// drives' usage (see above). A drive that does not answer is left out; a
// pool none of whose drives answered keeps its limit. Run it every health
// interval (the embedded cluster's health loop does) and at start.
func (s *Service) UpdatePoolLimits(ctx context.Context) {
	m, err := s.Map(ctx)
	if err != nil {
		return
	}
	for _, p := range m.Pools {
		if err := s.updatePoolLimit(ctx, m, &p); err != nil {
			s.log.Warn("pool limit", "pool", p.Name, "err", err)
		}
	}
}

func (s *Service) updatePoolLimit(ctx context.Context, m *clustermap.Map, p *clustermap.Pool) error {
	capa, err := m.PoolCapacity(p.ID)
	if err != nil {
		return err
	}
	limits, err := m.WriteLimits(p.ID)
	if err != nil {
		return err
	}
	room, ok := s.driveRoom(ctx, m, p, limits)
	used, cur, err := s.store.PoolUsage(ctx, p.ID)
	if err != nil {
		return err
	}
	want := uint64(capa.UsableRaw)
	if ok {
		want = min(want, used+uint64(room))
	}
	want = max(want, 1) // 0 would mean no limit
	// A tighter limit is stored at once; a looser one only when it moved
	// enough to be worth a transaction (or reached the usable capacity).
	step := max(uint64(capa.UsableRaw)/1000, 1<<20)
	if want == cur || (want > cur && want-cur < step && want != uint64(capa.UsableRaw)) {
		return nil
	}
	return s.store.SetPoolLimit(ctx, p.ID, want)
}

// driveRoom returns how many more shard bytes the pool can take before its
// first up drive reaches its client write limit; ok is false if no drive
// answered.
func (s *Service) driveRoom(ctx context.Context, m *clustermap.Map, p *clustermap.Pool, limits map[placement.DriveID]int64) (room int64, ok bool) {
	var (
		mu      sync.Mutex
		wg      sync.WaitGroup
		minRoom int64 = -1
		up      int64
	)
	for _, id := range p.Drives {
		d, err := m.Drive(id)
		if err != nil || d.State != clustermap.StateUp {
			continue
		}
		up++
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(ctx, statTimeout)
			defer cancel()
			drv, err := s.drives.Drive(m, id)
			if err != nil {
				return
			}
			u, err := drv.Stat(ctx)
			if err != nil {
				return
			}
			r := max(limits[id]-u.Used, 0)
			mu.Lock()
			if minRoom < 0 || r < minRoom {
				minRoom = r
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	if minRoom < 0 {
		return 0, false
	}
	frag := int64(erasure.FragmentSize(int(p.Unit)))
	perFrag := float64(p.Unit) / float64(frag)
	return int64(float64(max(minRoom-frag, 0)) * float64(up) / balanceMargin * perFrag), true
}
