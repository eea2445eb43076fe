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
// the shard bytes the store counts. "used" is not only the committed
// bytes: fragments written but not yet committed (a writer's stripes in
// flight) already take room on the drives, and will count as used when
// their commit comes, so counting them once in the room and again at their
// commit would refuse commits of fragments the drives had accepted (false
// "pool full" near the end of a nearly full pool whenever commits lag
// writes). So used = max(committed, (taken − queued garbage) × U/F), where
// taken is the fragment bytes the answering drives hold and queued garbage
// the fragments of the collector's queue on them (scanned when the queue is
// short; with a long one, committed alone, which only errs low). Fragments
// a failed writer left behind count as used until the collector finds
// them; the drives' own write limits, which the storage servers enforce,
// bound what any error here could admit. A drive that cannot take one more
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
	// The queue first, then the drives: garbage the collector deletes in
	// between is then subtracted though no longer taken, which errs low.
	garbage, known, err := s.queuedGarbage(ctx, m, p.ID)
	if err != nil {
		return err
	}
	ds := s.driveRoom(ctx, m, p, limits)
	used, cur, err := s.store.PoolUsage(ctx, p.ID)
	if err != nil {
		return err
	}
	want := uint64(capa.UsableRaw)
	if ds.ok {
		base := used
		if known {
			var g int64
			for id, b := range garbage {
				if ds.answered[id] {
					g += b
				}
			}
			base = max(base, uint64(max(float64(ds.taken-g)*ds.perFrag, 0)))
		}
		want = min(want, base+uint64(ds.room))
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

// maxGarbageScan bounds the collector queue items UpdatePoolLimits reads
// to learn the garbage on the drives; with more queued, it counts none.
const maxGarbageScan = 4096

// queuedGarbage returns the fragment bytes of the collector's queue per
// drive of pool; known is false when the queue is longer than
// maxGarbageScan.
func (s *Service) queuedGarbage(ctx context.Context, m *clustermap.Map, pool uint32) (map[placement.DriveID]int64, bool, error) {
	items, err := s.store.GCList(ctx, maxGarbageScan+1)
	if err != nil || len(items) > maxGarbageScan {
		return nil, false, err
	}
	out := map[placement.DriveID]int64{}
	for _, it := range items {
		frag := int64(erasure.FragmentSize(int(it.ShardSize)))
		for _, id := range it.Drives {
			if d, err := m.Drive(placement.DriveID(id)); err == nil && d.Pool == pool {
				out[placement.DriveID(id)] += frag
			}
		}
	}
	return out, true, nil
}

// poolRoom is what the up drives of a pool said about their space.
type poolRoom struct {
	room     int64                      // shard bytes the pool can take before its first up drive is at its limit
	taken    int64                      // fragment bytes the answering drives hold
	answered map[placement.DriveID]bool // drives that answered
	perFrag  float64                    // shard bytes per fragment byte of a full unit
	ok       bool                       // some drive answered
}

// driveRoom asks every up drive of pool p for its usage: room is how many
// more shard bytes the pool can take before its first up drive reaches its
// client write limit; ok is false if no drive answered.
func (s *Service) driveRoom(ctx context.Context, m *clustermap.Map, p *clustermap.Pool, limits map[placement.DriveID]int64) poolRoom {
	var (
		mu      sync.Mutex
		wg      sync.WaitGroup
		minRoom int64 = -1
		up      int64
		ds      = poolRoom{answered: map[placement.DriveID]bool{}}
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
			ds.taken += u.Used
			ds.answered[id] = true
			mu.Unlock()
		}()
	}
	wg.Wait()
	if minRoom < 0 {
		return ds
	}
	frag := int64(erasure.FragmentSize(int(p.Unit)))
	ds.perFrag = float64(p.Unit) / float64(frag)
	ds.room = int64(float64(max(minRoom-frag, 0)) * float64(up) / balanceMargin * ds.perFrag)
	ds.ok = true
	return ds
}
