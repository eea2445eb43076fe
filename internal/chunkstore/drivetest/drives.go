package drivetest

import (
	"context"
	"fmt"
	"sync"

	"poolfs/internal/chunkstore"
	"poolfs/internal/clustermap"
	"poolfs/internal/placement"
)

// Drives is a set of Drives by ID. Its Drive method resolves an ID as a
// storage dialer does (mgmt's drives, fsck.Drives, storage.Peers): every
// drive of the set, whatever the map says of it. UpOnly resolves as the
// client's drives do.
type Drives map[placement.DriveID]*Drive

// NewDrives returns n new drives with IDs 0 to n-1.
func NewDrives(n int) Drives {
	ds := Drives{}
	for i := range n {
		id := placement.DriveID(i)
		ds[id] = New(id.String())
	}
	return ds
}

// DrivesOf returns a new drive for every drive of m, with the capacity
// the map gives it, so that a writer that runs away fills the drives as it
// would fill real ones, rather than memory.
func DrivesOf(m *clustermap.Map) Drives {
	ds := Drives{}
	for _, md := range m.Drives {
		ds[md.ID] = NewWithCapacity(md.ID.String(), md.Capacity)
	}
	return ds
}

// Drive returns drive id, or an error wrapping clustermap.ErrNoDrive if
// the set has no such drive.
func (ds Drives) Drive(_ *clustermap.Map, id placement.DriveID) (chunkstore.Drive, error) {
	d, ok := ds[id]
	if !ok {
		return nil, fmt.Errorf("drivetest: drive %v: %w", id, clustermap.ErrNoDrive)
	}
	return d, nil
}

// UpOnly resolves IDs to the drives of a set as the client's drives do
// for a drive that is not up and does not answer (mgmt.ReportingDrives
// fails it at once, or after a bounded read of a down drive): a
// drive the map says is not up (down, failed, rebuilding, out) is refused
// at once with an error wrapping chunkstore.ErrOffline, and the refusal is
// counted on it (Drive.Refused), so that a test can tell that a reader
// asked for a drive it should have known to be unusable. With a nil map,
// or a drive the map does not list, the drive is handed out.
type UpOnly Drives

// Drive returns drive id, or an error if the set has no such drive or the
// map says it is not up.
func (u UpOnly) Drive(m *clustermap.Map, id placement.DriveID) (chunkstore.Drive, error) {
	d, ok := u[id]
	if !ok {
		return nil, fmt.Errorf("drivetest: drive %v: %w", id, clustermap.ErrNoDrive)
	}
	if m != nil {
		if md, err := m.Drive(id); err == nil && md.State != clustermap.StateUp {
			d.refused.Add(1)
			return nil, fmt.Errorf("drive %v is %s: %w", id, md.State, chunkstore.ErrOffline)
		}
	}
	return d, nil
}

// Reads, Writes and BytesWritten sum the counters of every drive of the
// set.
func (ds Drives) Reads() int64        { return ds.sum((*Drive).Reads) }
func (ds Drives) Writes() int64       { return ds.sum((*Drive).Writes) }
func (ds Drives) BytesWritten() int64 { return ds.sum((*Drive).BytesWritten) }

func (ds Drives) sum(f func(*Drive) int64) int64 {
	var n int64
	for _, d := range ds {
		n += f(d)
	}
	return n
}

// Map returns the cluster map (epoch 1) of one pool, ID 0 and named
// "default", of the drives 0 to n-1, all up with capacity bytes each,
// protected k+m with stripe units of unit bytes, in the declustered layout
// with the default number of PGs and no preservation space: the map an
// embedded cluster starts with. It panics if those make no valid map.
func Map(n, k, m int, unit uint32, capacity int64) *clustermap.Map {
	cm := &clustermap.Map{Epoch: 1, Name: "drivetest"}
	pool := clustermap.Pool{ID: 0, Name: "default", K: k, M: m, Unit: unit,
		PGs: placement.DefaultPGs(n, k+m), Layout: placement.Declustered}
	for i := range n {
		id := placement.DriveID(i)
		cm.Drives = append(cm.Drives, clustermap.Drive{ID: id, Capacity: capacity, State: clustermap.StateUp})
		pool.Drives = append(pool.Drives, id)
	}
	cm.Pools = []clustermap.Pool{pool}
	if err := cm.Validate(); err != nil {
		panic(fmt.Sprintf("drivetest: %d drives %d+%d: %v", n, k, m, err))
	}
	return cm
}

// Maps serves a cluster map that a test can replace; it is a
// client.MapSource. It is safe for concurrent use.
type Maps struct {
	mu struct {
		sync.Mutex
		m *clustermap.Map
	}
}

// NewMaps returns a Maps serving m.
func NewMaps(m *clustermap.Map) *Maps {
	s := &Maps{}
	s.mu.m = m
	return s
}

// Map returns the current map. The caller must not change it.
func (s *Maps) Map(context.Context) (*clustermap.Map, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.m, nil
}

// Update replaces the map by a copy that fn changed, with the next epoch,
// as the management service's Update does.
func (s *Maps) Update(fn func(m *clustermap.Map)) *clustermap.Map {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := s.mu.m.Clone()
	fn(next)
	next.Epoch = s.mu.m.Epoch + 1
	s.mu.m = next
	return next
}
