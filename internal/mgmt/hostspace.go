package mgmt

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"poolfs/internal/chunkstore"
	"poolfs/internal/clustermap"
	"poolfs/internal/placement"
)

// EventHostSpaceLow is logged when the drives on a host file system may
// take more space than it has left: writes will fail for lack of space
// before the pools are full (another user filled the disk, or the drives
// advertise more than the host holds).
const EventHostSpaceLow = "host.space-low"

// HostSpace is one host file system holding drives, in the status.
type HostSpace struct {
	Server string `json:"server"`
	Drives int    `json:"drives"`
	// Free is what the file system has left; Promised what its drives in
	// service may still take (advertised capacity less what they take).
	Free     int64 `json:"free"`
	Promised int64 `json:"promised"`
}

// Short reports whether the drives may take more than the host has left.
func (h HostSpace) Short() bool { return h.Promised > h.Free }

// Note is the status line of a short host.
func (h HostSpace) Note() string {
	return fmt.Sprintf("host file system of server %s has %s free, but its %d drives advertise %s more: "+
		"writes will fail for lack of space before the pools are full; free space on the host or use smaller drives",
		h.Server, human(h.Free), h.Drives, human(h.Promised))
}

// driveSpace is one drive's usage as its server reported it.
type driveSpace struct {
	server string
	usage  chunkstore.Usage
}

// hostSpaces groups drives by host file system (server and HostFS), in
// server order. A drive that does not measure what it takes counts its
// fragments.
func hostSpaces(drives []driveSpace) []HostSpace {
	type key struct {
		server string
		fs     uint64
	}
	byHost := map[key]*HostSpace{}
	var keys []key
	for _, d := range drives {
		k := key{d.server, d.usage.HostFS}
		h := byHost[k]
		if h == nil {
			h = &HostSpace{Server: d.server}
			byHost[k] = h
			keys = append(keys, k)
		}
		taken := d.usage.Allocated
		if taken == 0 {
			taken = d.usage.Used
		}
		h.Drives++
		h.Free = max(h.Free, d.usage.HostFree)
		h.Promised += max(0, d.usage.Capacity-taken)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].server != keys[j].server {
			return keys[i].server < keys[j].server
		}
		return keys[i].fs < keys[j].fs
	})
	out := make([]HostSpace, len(keys))
	for i, k := range keys {
		out[i] = *byHost[k]
	}
	return out
}

// spaceWatch keeps the usage each probe of the failure detector finds, so
// that a host running short is an event as soon as it happens.
type spaceWatch struct {
	mu struct {
		sync.Mutex
		usage map[placement.DriveID]chunkstore.Usage
		short map[string]bool // servers announced short
	}
}

func (w *spaceWatch) record(id placement.DriveID, u chunkstore.Usage) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.usage == nil {
		w.mu.usage = map[placement.DriveID]chunkstore.Usage{}
	}
	w.mu.usage[id] = u
}

// checkHostSpace logs a host.space-low event for each host that became
// short since the last check (from the usages the probes recorded).
func (s *Service) checkHostSpace(ctx context.Context, m *clustermap.Map) {
	w := &s.space
	w.mu.Lock()
	var drives []driveSpace
	for _, d := range m.Drives {
		if u, ok := w.mu.usage[d.ID]; ok && (d.State == clustermap.StateUp || d.State == clustermap.StateDown) {
			drives = append(drives, driveSpace{d.Server, u})
		}
	}
	var fresh []HostSpace
	short := map[string]bool{}
	for _, h := range hostSpaces(drives) {
		if h.Short() {
			short[h.Server] = true
			if !w.mu.short[h.Server] {
				fresh = append(fresh, h)
			}
		}
	}
	w.mu.short = short
	w.mu.Unlock()
	for _, h := range fresh {
		s.event(ctx, EventHostSpaceLow, "server/"+h.Server, h.Note(), 0)
	}
}
