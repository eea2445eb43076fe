package mgmt

import (
	"context"
	"sync"
	"time"

	"poolfs/internal/clustermap"
	"poolfs/internal/placement"
)

// Health of a pool or cluster.
const (
	HealthOK       = "ok"       // every drive up
	HealthDegraded = "degraded" // some drives not up; every stripe still readable
	HealthCritical = "critical" // as many drives lost as parity covers: one more loses data
)

// DriveStatus is one drive in the status report.
type DriveStatus struct {
	ID        string                `json:"id"`
	Server    string                `json:"server"`
	State     clustermap.DriveState `json:"state"`
	Capacity  int64                 `json:"capacity"`
	Used      int64                 `json:"used"`
	Fragments int64                 `json:"fragments"`
	PGSlots   int                   `json:"pg_slots"` // fragment slots of the pool's PGs on this drive
	Error     string                `json:"error,omitempty"`
	// DownSince (unix ns) and GraceLeft (seconds) are set for a down
	// drive: it is declared failed and rebuilt when GraceLeft reaches 0.
	DownSince int64   `json:"down_since,omitempty"`
	GraceLeft float64 `json:"grace_left_sec,omitempty"`
}

// PoolStatus is one pool in the status report.
type PoolStatus struct {
	ID           uint32              `json:"id"`
	Name         string              `json:"name"`
	Scheme       string              `json:"scheme"`
	Layout       string              `json:"layout"`
	Unit         uint32              `json:"unit"`
	PGs          int                 `json:"pgs"`
	Drives       int                 `json:"drives"`
	DrivesUp     int                 `json:"drives_up"`
	Preservation int                 `json:"preservation_drives"`
	Health       string              `json:"health"`
	Capacity     clustermap.Capacity `json:"capacity"`
	UsedRaw      uint64              `json:"used_raw"`  // raw bytes of committed stripes
	UsedUser     uint64              `json:"used_user"` // the user bytes they hold (approx.)
	// PGBalance is the busiest drive's PG slots over the mean (1.00 is perfect).
	PGBalance float64 `json:"pg_balance"`
	// DownGrace is how long a drive may stay down before it is declared
	// failed and rebuilt, in seconds.
	DownGrace float64 `json:"down_grace_sec"`
	// HotSpareFor (grouped layout) names the hot spare standing in for each
	// replaced group drive.
	HotSpareFor map[string]string `json:"hot_spare_for,omitempty"`
}

// Status is what `poolfs status` shows.
type Status struct {
	Name   string        `json:"name"`
	Epoch  uint64        `json:"epoch"`
	Health string        `json:"health"`
	Pools  []PoolStatus  `json:"pools"`
	Drives []DriveStatus `json:"drives"`
	// Rebuild is the recovery coordinator's state: degraded and critical
	// stripes, progress, rate and ETA of a running rebuild or rebalance.
	Rebuild RebuildStatus `json:"rebuild"`
}

// Status gathers the cluster status: the map, the pools' capacity and
// usage, and every drive's fill as its storage server reports it.
func (s *Service) Status(ctx context.Context) (*Status, error) {
	m, err := s.Map(ctx)
	if err != nil {
		return nil, err
	}
	st := &Status{Name: m.Name, Epoch: m.Epoch, Health: HealthOK, Rebuild: s.Rebuild()}
	slots := map[placement.DriveID]int{}
	for _, p := range m.Pools {
		ps, err := s.poolStatus(ctx, m, p, slots)
		if err != nil {
			return nil, err
		}
		st.Pools = append(st.Pools, ps)
		st.Health = worse(st.Health, ps.Health)
	}
	st.Drives = make([]DriveStatus, len(m.Drives))
	var wg sync.WaitGroup
	now := time.Now()
	for i, d := range m.Drives {
		st.Drives[i] = DriveStatus{ID: d.ID.String(), Server: d.Server, State: d.State,
			Capacity: d.Capacity, PGSlots: slots[d.ID]}
		if left, down := m.GraceLeft(d.ID, now); down {
			st.Drives[i].DownSince, st.Drives[i].GraceLeft = d.DownSince, left.Seconds()
			st.Drives[i].Error = "not answering"
			continue // not asked: it does not answer
		}
		wg.Add(1)
		go func(ds *DriveStatus, id placement.DriveID) {
			defer wg.Done()
			drv, err := s.drives.Drive(m, id)
			if err == nil {
				u, err2 := drv.Stat(ctx)
				ds.Used, ds.Fragments, err = u.Used, u.Fragments, err2
			}
			if err != nil {
				ds.Error = err.Error()
			}
		}(&st.Drives[i], d.ID)
	}
	wg.Wait()
	return st, nil
}

func (s *Service) poolStatus(ctx context.Context, m *clustermap.Map, p clustermap.Pool, slots map[placement.DriveID]int) (PoolStatus, error) {
	ps := PoolStatus{ID: p.ID, Name: p.Name, Scheme: scheme(p), Layout: layoutName(p.Layout), Unit: p.Unit,
		PGs: p.PGs, Drives: len(p.Drives), Preservation: p.Preservation, DownGrace: p.Grace().Seconds()}
	for g, sp := range p.HotSpareFor {
		if ps.HotSpareFor == nil {
			ps.HotSpareFor = map[string]string{}
		}
		ps.HotSpareFor[g.String()] = sp.String()
	}
	for _, id := range p.Drives {
		if d, err := m.Drive(id); err == nil && d.State == clustermap.StateUp {
			ps.DrivesUp++
		}
	}
	lost := ps.Drives - ps.DrivesUp
	switch {
	case lost == 0:
		ps.Health = HealthOK
	case lost < p.M:
		ps.Health = HealthDegraded
	default:
		ps.Health = HealthCritical
	}
	var err error
	if ps.Capacity, err = m.PoolCapacity(p.ID); err != nil {
		return ps, err
	}
	if ps.UsedRaw, _, err = s.store.PoolUsage(ctx, p.ID); err != nil {
		return ps, err
	}
	ps.UsedUser = ps.UsedRaw / uint64(p.K+p.M) * uint64(p.K)
	if pp, err := m.Placement(p.ID); err == nil {
		if pm, err := pp.Map(); err == nil {
			for id, n := range pm.DriveLoad() {
				slots[id] += n
			}
			ps.PGBalance = pm.Balance()
		}
	}
	return ps, nil
}

func worse(a, b string) string {
	rank := map[string]int{HealthOK: 0, HealthDegraded: 1, HealthCritical: 2}
	if rank[b] > rank[a] {
		return b
	}
	return a
}

func scheme(p clustermap.Pool) string {
	return itoa(p.K) + "+" + itoa(p.M)
}

func layoutName(l placement.Layout) string {
	if l == placement.Grouped {
		return "grouped"
	}
	return "declustered"
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}
