package clustermap

import (
	"errors"
	"fmt"
	"maps"
	"sort"
	"time"

	"poolfs/internal/placement"
)

// DriveState is where a drive is in its life cycle.
type DriveState string

// Drive states. Only Up drives receive new fragments.
const (
	StateUp         DriveState = "up"
	StateDown       DriveState = "down"       // unreachable for now; not yet rebuilt
	StateFailed     DriveState = "failed"     // declared dead; its data is being or was rebuilt
	StateRebuilding DriveState = "rebuilding" // a replacement being filled
	StateOut        DriveState = "out"        // removed by the operator
)

// Drive is one drive of the cluster.
type Drive struct {
	ID       placement.DriveID `json:"id"`
	Server   string            `json:"server"`   // ID of the storage server owning it
	Path     string            `json:"path"`     // directory on that server
	Capacity int64             `json:"capacity"` // advertised bytes
	Domain   []string          `json:"domain,omitempty"`
	State    DriveState        `json:"state"`
	Pool     uint32            `json:"pool"`
	// Model is the emulated speed model ("" or "none": unthrottled) and
	// SpeedScale its scale factor (0: 1), see chunkstore.ModelByName.
	Model      string  `json:"model,omitempty"`
	SpeedScale float64 `json:"speed_scale,omitempty"`
	// DownSince is when a Down drive was last seen answering (unix ns);
	// 0 in every other state. See state.go.
	DownSince int64 `json:"down_since,omitempty"`
}

// Server is one storage server.
type Server struct {
	ID   string `json:"id"`
	Addr string `json:"addr"`
	// Rack and Enclosure are the server's failure-domain labels ("" when
	// not given); its drives' Domain is {Rack, Enclosure, ID}.
	Rack      string `json:"rack,omitempty"`
	Enclosure string `json:"enclosure,omitempty"`
}

// Pool is one pool of drives with its protection scheme.
type Pool struct {
	ID           uint32           `json:"id"`
	Name         string           `json:"name"`
	K            int              `json:"k"`
	M            int              `json:"m"`
	Unit         uint32           `json:"unit"` // stripe unit bytes
	PGs          int              `json:"pgs"`
	Layout       placement.Layout `json:"layout"`
	Preservation int              `json:"preservation"` // drives' worth of space kept free for rebuild
	Drives       []placement.DriveID
	// RebuildPriority trades rebuild speed against client I/O: one of
	// Priorities; "" means medium.
	RebuildPriority string `json:"rebuild_priority,omitempty"`
	// SmallFileThreshold: files of at most this many bytes are mirrored
	// rather than erasure-coded; nil means DefaultSmallFileThreshold, 0
	// disables. Replaced, never mutated in place (Clone shares it). See
	// SmallFileLimit (smallfile.go).
	SmallFileThreshold *int64 `json:"small_file_threshold,omitempty"`
	// DownGrace is how long a drive may stay Down before it is declared
	// failed and rebuilt; 0 means DefaultDownGrace. See Pool.Grace.
	DownGrace time.Duration `json:"down_grace,omitempty"`
	// HotSpareFor (grouped layout) records which hot spare stands in for
	// which Out group drive, so that assignments stick from epoch to epoch
	// (placement.Pool.SpareFor). Maintained by RecordSpares.
	HotSpareFor map[placement.DriveID]placement.DriveID `json:"hot_spare_for,omitempty"`
}

// Map is the cluster map at one epoch.
type Map struct {
	Epoch   uint64   `json:"epoch"`
	Name    string   `json:"name"`
	Meta    []string `json:"meta"` // metadata service addresses
	Servers []Server `json:"servers"`
	Drives  []Drive  `json:"drives"`
	Pools   []Pool   `json:"pools"`
}

// Errors returned by lookups and validation.
var (
	ErrNoDrive = errors.New("clustermap: no such drive")
	ErrNoPool  = errors.New("clustermap: no such pool")
	ErrInvalid = errors.New("clustermap: invalid map")
)

// Drive returns the drive with the given ID.
func (m *Map) Drive(id placement.DriveID) (*Drive, error) {
	for i := range m.Drives {
		if m.Drives[i].ID == id {
			return &m.Drives[i], nil
		}
	}
	return nil, fmt.Errorf("%w: %v", ErrNoDrive, id)
}

// Pool returns the pool with the given ID.
func (m *Map) Pool(id uint32) (*Pool, error) {
	for i := range m.Pools {
		if m.Pools[i].ID == id {
			return &m.Pools[i], nil
		}
	}
	return nil, fmt.Errorf("%w: %d", ErrNoPool, id)
}

// PoolByName returns the pool with the given name.
func (m *Map) PoolByName(name string) (*Pool, error) {
	for i := range m.Pools {
		if m.Pools[i].Name == name {
			return &m.Pools[i], nil
		}
	}
	return nil, fmt.Errorf("%w: %q", ErrNoPool, name)
}

// ServerAddr returns the address of the server owning a drive.
func (m *Map) ServerAddr(id placement.DriveID) (string, error) {
	d, err := m.Drive(id)
	if err != nil {
		return "", err
	}
	for _, s := range m.Servers {
		if s.ID == d.Server {
			return s.Addr, nil
		}
	}
	return "", fmt.Errorf("%w: drive %v on unknown server %q", ErrInvalid, id, d.Server)
}

// Placement returns the placement view of a pool: its drives with weights
// from their capacity, and every drive that is not Up marked Out (a Down
// drive too: new stripes go to substitutes while it is away), and the
// grouped layout's recorded hot spare assignments.
func (m *Map) Placement(poolID uint32) (*placement.Pool, error) {
	p, err := m.Pool(poolID)
	if err != nil {
		return nil, err
	}
	pp := &placement.Pool{ID: p.ID, K: p.K, M: p.M, PGs: p.PGs, Layout: p.Layout}
	if p.Layout == placement.Grouped {
		pp.Spares = p.Preservation
		pp.SpareFor = maps.Clone(p.HotSpareFor)
	}
	for _, id := range p.Drives {
		d, err := m.Drive(id)
		if err != nil {
			return nil, err
		}
		pp.Drives = append(pp.Drives, placement.Drive{
			ID:     d.ID,
			Weight: float64(d.Capacity) / (1 << 30),
			Domain: d.Domain,
			Out:    d.State != StateUp,
		})
	}
	return pp, nil
}

// Validate checks the invariants listed in the package comment.
func (m *Map) Validate() error {
	seen := map[placement.DriveID]bool{}
	for _, d := range m.Drives {
		if seen[d.ID] {
			return fmt.Errorf("%w: drive %v listed twice", ErrInvalid, d.ID)
		}
		seen[d.ID] = true
		if d.Capacity <= 0 {
			return fmt.Errorf("%w: drive %v has capacity %d", ErrInvalid, d.ID, d.Capacity)
		}
	}
	for _, p := range m.Pools {
		if p.K < 1 || p.M < 0 {
			return fmt.Errorf("%w: pool %q scheme %d+%d", ErrInvalid, p.Name, p.K, p.M)
		}
		if len(p.Drives) < p.K+p.M+1 {
			return fmt.Errorf("%w: pool %q has %d drives, %d+%d needs at least %d",
				ErrInvalid, p.Name, len(p.Drives), p.K, p.M, p.K+p.M+1)
		}
		if p.DownGrace < 0 {
			return fmt.Errorf("%w: pool %q down grace %v", ErrInvalid, p.Name, p.DownGrace)
		}
		if p.Preservation < 0 || len(p.Drives)-p.Preservation < p.K+p.M {
			return fmt.Errorf("%w: pool %q preservation %d leaves fewer than %d drives for data",
				ErrInvalid, p.Name, p.Preservation, p.K+p.M)
		}
		for _, id := range p.Drives {
			if !seen[id] {
				return fmt.Errorf("%w: pool %q names unknown drive %v", ErrInvalid, p.Name, id)
			}
		}
	}
	return nil
}

// Clone returns a deep copy, for building the next epoch.
func (m *Map) Clone() *Map {
	c := *m
	c.Meta = append([]string(nil), m.Meta...)
	c.Servers = append([]Server(nil), m.Servers...)
	c.Drives = make([]Drive, len(m.Drives))
	for i, d := range m.Drives {
		d.Domain = append([]string(nil), d.Domain...)
		c.Drives[i] = d
	}
	c.Pools = make([]Pool, len(m.Pools))
	for i, p := range m.Pools {
		p.Drives = append([]placement.DriveID(nil), p.Drives...)
		p.HotSpareFor = maps.Clone(p.HotSpareFor)
		c.Pools[i] = p
	}
	return &c
}

// PoolDrives returns the drives of a pool sorted by ID.
func (m *Map) PoolDrives(poolID uint32) []Drive {
	var out []Drive
	for _, d := range m.Drives {
		if d.Pool == poolID {
			out = append(out, d)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}
