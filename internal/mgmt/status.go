package mgmt

import (
	"context"
	"time"

	"poolfs/internal/chunkstore"
	"poolfs/internal/clustermap"
	"poolfs/internal/mgmt/rebuild"
	"poolfs/internal/placement"
)

// DriveStatus is one drive in the status report.
type DriveStatus struct {
	ID        string                `json:"id"`
	Server    string                `json:"server"`
	State     clustermap.DriveState `json:"state"`
	Capacity  int64                 `json:"capacity"`
	Used      int64                 `json:"used"`
	Fragments int64                 `json:"fragments"`
	// Allocated is what the drive's files take on the host (0: not
	// measured); HostFree what the host file system holding it has left.
	Allocated int64 `json:"allocated,omitempty"`
	HostFree  int64 `json:"host_free,omitempty"`
	// Kept is the part of Allocated held by removed small files' space
	// kept for reuse (chunkstore.Usage.Kept): at most 16 MiB a drive.
	Kept int64 `json:"kept,omitempty"`
	// Written is the bytes the drive has written to store fragments
	// (fragments and their record headers) since its server opened it
	// (chunkstore.Usage.Written): client writes, rebuilds, repairs, folds
	// and moves alike. Two readings apart give the bytes written
	// in between; it starts again from 0 when the server restarts.
	Written int64 `json:"written"`
	// Reads, ReadBytes and Writes count the drive's fragment reads, the
	// bytes they returned and its fragment writes since its server opened
	// it (chunkstore.Usage): like Written, two readings apart give a rate.
	Reads     int64 `json:"reads,omitempty"`
	ReadBytes int64 `json:"read_bytes,omitempty"`
	Writes    int64 `json:"writes,omitempty"`
	// Latency is the smoothed duration of the failure detector's probes of
	// the drive (0: not probed yet), what slow drives are judged by.
	Latency time.Duration `json:"probe_latency_ns,omitempty"`
	hostFS  uint64
	pool    uint32
	PGSlots int    `json:"pg_slots"` // fragment slots of the pool's PGs on this drive
	Error   string `json:"error,omitempty"`
	// DownSince (unix ns) and GraceLeft (seconds) are set for a down
	// drive: it is declared failed and rebuilt when GraceLeft reaches 0.
	DownSince int64   `json:"down_since,omitempty"`
	GraceLeft float64 `json:"grace_left_sec,omitempty"`
	// Slow describes a drive flagged as far slower than its peers (slow.go).
	Slow string `json:"slow,omitempty"`
}

// PoolStatus is one pool in the status report.
type PoolStatus struct {
	ID           uint32 `json:"id"`
	Name         string `json:"name"`
	Scheme       string `json:"scheme"`
	Layout       string `json:"layout"`
	Unit         uint32 `json:"unit"`
	PGs          int    `json:"pgs"`
	Drives       int    `json:"drives"` // in the pool, replaced ones not counted
	DrivesUp     int    `json:"drives_up"`
	Preservation int    `json:"preservation_drives"`
	// Health is the redundancy of the pool's data (see Assess), and Notes
	// the lines that explain it and say what to do, most urgent first.
	Health string   `json:"health"`
	Notes  []string `json:"notes,omitempty"`
	// Capacity counts the drives in service (up or down): Raw leaves out
	// failed drives (FailedRaw), and Preservation is the rebuild capacity
	// left, which rebuilds consume. UsableRaw and Usable are what the pool
	// promises its data.
	Capacity             clustermap.Capacity `json:"capacity"`
	FailedRaw            int64               `json:"failed_raw,omitempty"`
	PreservationReserved int64               `json:"preservation_reserved"`
	UsedRaw              uint64              `json:"used_raw"`  // raw bytes of committed stripes
	UsedUser             uint64              `json:"used_user"` // the user bytes they hold (approx.)
	// Reclaimable is raw space the pool's drives take beyond the committed
	// stripes: fragments of replaced generations and removed files the
	// collector has not deleted yet, writes not yet committed, segment
	// space not yet freed or preallocated. It is used space until
	// collected.
	Reclaimable int64 `json:"reclaimable"`
	// Kept is the part of Reclaimable that the drives keep for reuse
	// after the collector deleted it (removed small files' space, whose
	// pages the next small files are written into): at most 16 MiB a
	// drive, the stated garbage budget (docs/capacity.md).
	Kept int64 `json:"kept,omitempty"`
	// Written is the sum of DriveStatus.Written over the pool's drives
	// that answered (a drive that did not answer is missing from it).
	Written int64 `json:"written"`
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
	// Hosts is the space of the host file systems holding the drives, and
	// Notes warns of those whose drives may take more than they have.
	Hosts []HostSpace `json:"hosts,omitempty"`
	Notes []string    `json:"notes,omitempty"`
	// IO is the recent I/O of the clients and the busiest jobs (IOStats).
	IO *IOStatsSnapshot `json:"io,omitempty"`
}

// statusRescan is the age of the stripe counts past which a status call
// asks the coordinator for a fresh scan (the coordinator otherwise scans
// when drive states change and every rebuild interval), or ten times the
// last scan's duration if that is longer.
const statusRescan = 5 * time.Second

// Status gathers the cluster status: the map, every drive's fill as its
// storage server reports it, and each pool's capacity, usage and health
// (Assess, from the coordinator's last scan of its stripes).
func (s *Service) Status(ctx context.Context) (*Status, error) {
	return s.status(ctx, true)
}

// status is Status; kick false never asks the coordinator for a rescan
// (the alert rules, evaluated often, take the counts as they are).
func (s *Service) status(ctx context.Context, kick bool) (*Status, error) {
	m, err := s.Map(ctx)
	if err != nil {
		return nil, err
	}
	st := &Status{Name: m.Name, Epoch: m.Epoch, Health: HealthOK, Rebuild: s.Rebuild()}
	now := time.Now()
	// At most a tenth of the time goes to scans asked for by status.
	rescan := max(statusRescan, time.Duration(10*st.Rebuild.ScanSec*float64(time.Second)))
	if kick && !st.Rebuild.Active && now.Sub(time.Unix(0, st.Rebuild.Scanned)) > rescan {
		s.kickRebuild() // the stripe counts are old: the next status has fresh ones
	}
	var inMap []*clustermap.Drive
	for i := range m.Drives {
		if d := &m.Drives[i]; d.State != clustermap.StateOut { // a replaced drive is no longer part of the cluster
			inMap = append(inMap, d)
			st.Drives = append(st.Drives, DriveStatus{ID: d.ID.String(), Server: d.Server, State: d.State, Capacity: d.Capacity,
				pool: d.Pool})
		}
	}
	var ask []int // the drives to ask for their usage, indexes into inMap
	for i, d := range inMap {
		ds := &st.Drives[i]
		if d.State == clustermap.StateUp || d.State == clustermap.StateDown {
			ds.Slow, _ = s.slow.Desc(d.ID)
			ds.Latency = s.slow.Latency(d.ID)
		}
		if left, down := m.GraceLeft(d.ID, now); down {
			ds.DownSince, ds.GraceLeft = d.DownSince, left.Seconds()
			ds.Error = "not answering"
			continue // not asked: it does not answer
		}
		if d.State == clustermap.StateFailed {
			continue // not asked: what it held is rebuilt elsewhere
		}
		ask = append(ask, i)
	}
	s.askDrives(ctx, m, inMap, st.Drives, ask) // status_ask.go
	var space []driveSpace
	for _, ds := range st.Drives {
		if ds.Error == "" && ds.State != clustermap.StateFailed {
			space = append(space, driveSpace{ds.Server, chunkstore.Usage{Capacity: ds.Capacity, Used: ds.Used,
				Allocated: ds.Allocated, HostFree: ds.HostFree, HostFS: ds.hostFS}})
		}
	}
	st.Hosts = hostSpaces(space)
	for _, h := range st.Hosts {
		if h.Short() {
			st.Notes = append(st.Notes, h.Note())
		}
	}
	if s.StatusNotes != nil {
		st.Notes = append(st.Notes, s.StatusNotes()...)
	}
	slots := map[placement.DriveID]int{}
	for i := range m.Pools {
		ps, err := s.poolStatus(ctx, m, &m.Pools[i], st.Drives, slots, now)
		if err != nil {
			return nil, err
		}
		st.Pools = append(st.Pools, ps)
		st.Health = worse(st.Health, ps.Health)
	}
	for i, d := range inMap {
		st.Drives[i].PGSlots = slots[d.ID]
	}
	io := s.IOStats()
	st.IO = &io
	return st, nil
}

func (s *Service) poolStatus(ctx context.Context, m *clustermap.Map, p *clustermap.Pool, drives []DriveStatus,
	slots map[placement.DriveID]int, now time.Time) (PoolStatus, error) {
	ps := PoolStatus{ID: p.ID, Name: p.Name, Scheme: scheme(*p), Layout: layoutName(p.Layout), Unit: p.Unit,
		PGs: p.PGs, Preservation: p.Preservation, DownGrace: p.Grace().Seconds()}
	for g, sp := range p.HotSpareFor {
		if ps.HotSpareFor == nil {
			ps.HotSpareFor = map[string]string{}
		}
		ps.HotSpareFor[g.String()] = sp.String()
	}
	var err error
	if ps.Capacity, err = m.PoolCapacity(p.ID); err != nil {
		return ps, err
	}
	ps.PreservationReserved = ps.Capacity.Preservation
	rb, sig, scanned := s.rb.Pool(p.ID)
	in := HealthInput{M: p.M, Current: scanned && sig == rebuild.StateSig(m, p),
		Stripes: rb.Stripes, Degraded: rb.Degraded, Critical: rb.Critical, Lost: rb.LostStripes,
		Waiting: rb.Waiting, Blocked: rb.Blocked, LostFiles: len(rb.Lost),
		Active: rb.Active, Kind: rb.Kind, Percent: rb.Percent(), Rate: rb.Rate,
		ETA: time.Duration(rb.ETA * float64(time.Second)), Incomplete: rb.Incomplete,
		Preservation: ps.Capacity.Preservation}
	for _, id := range p.Drives {
		d, err := m.Drive(id)
		if err != nil {
			return ps, err
		}
		switch d.State {
		case clustermap.StateOut:
			continue
		case clustermap.StateUp:
			ps.DrivesUp++
		case clustermap.StateFailed:
			in.Failed = append(in.Failed, id.String())
			ps.FailedRaw += d.Capacity
		case clustermap.StateDown:
			left, _ := m.GraceLeft(id, now)
			in.Down = append(in.Down, DownDrive{ID: id.String(), GraceLeft: left})
		}
		ps.Drives++
	}
	// Failed drives hold nothing any more: their data is rebuilt into the
	// preservation capacity, which shrinks by as much.
	ps.Capacity.Raw -= ps.FailedRaw
	in.PreservationLeft = ps.Capacity.Raw - ps.Capacity.UsableRaw
	ps.Capacity.Preservation = max(0, in.PreservationLeft)
	if ps.UsedRaw, _, err = s.store.PoolUsage(ctx, p.ID); err != nil {
		return ps, err
	}
	ps.UsedUser = ps.UsedRaw / uint64(p.K+p.M) * uint64(p.K)
	var taken int64
	for _, ds := range drives {
		if ds.pool == p.ID {
			taken += max(ds.Allocated, ds.Used)
			ps.Kept += ds.Kept
			ps.Written += ds.Written
		}
	}
	ps.Reclaimable = max(0, taken-int64(ps.UsedRaw))
	verdict := Assess(in)
	ps.Health, ps.Notes = verdict.Health, verdict.Notes
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
