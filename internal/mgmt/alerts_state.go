package mgmt

import (
	"time"

	"poolfs/internal/alerts"
	"poolfs/internal/clustermap"
)

// alertState is the snapshot the alert rules judge: the status's pools
// and drives, the map's servers and the clocks the probes compared.
func (s *Service) alertState(st *Status, now time.Time) alerts.State {
	out := alerts.State{Now: now, Clocks: s.clocks.readings()}
	byPool := map[uint32]RebuildStatus{}
	for _, r := range st.Rebuild.Pools {
		byPool[r.Pool] = r
	}
	for _, p := range st.Pools {
		r := byPool[p.ID]
		out.Pools = append(out.Pools, alerts.Pool{Name: p.Name, UsableRaw: p.Capacity.UsableRaw, UsedRaw: int64(p.UsedRaw),
			RebuildActive: r.Active, RebuildKind: r.Kind, RebuildDone: r.BytesDone, Incomplete: r.Incomplete, Blocked: r.Blocked,
			LostStripes: r.LostStripes, LostFiles: len(r.Lost),
			Preservation: p.PreservationReserved, PreservationLeft: p.Capacity.Raw - p.Capacity.UsableRaw})
	}
	for _, h := range st.Hosts {
		if h.Short() {
			out.HostsShort = append(out.HostsShort, alerts.HostShort{Server: h.Server, Message: h.Note()})
		}
	}
	servers := map[string]bool{}
	for _, d := range st.Drives {
		ad := alerts.Drive{ID: d.ID, Server: d.Server, State: string(d.State), Slow: d.Slow}
		if d.State == clustermap.StateDown && d.DownSince != 0 {
			ad.DownSince = time.Unix(0, d.DownSince)
		}
		out.Drives = append(out.Drives, ad)
		if d.Server != "" && !servers[d.Server] {
			servers[d.Server] = true
			out.Servers = append(out.Servers, d.Server)
		}
	}
	return out
}
