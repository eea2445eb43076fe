package plan

import (
	"errors"
	"fmt"

	"poolfs/internal/chunkstore"
	"poolfs/internal/clustermap"
	"poolfs/internal/erasure"
	"poolfs/internal/placement"
)

// ErrInvalid is returned for a pool description that cannot be planned.
var ErrInvalid = errors.New("plan: invalid input")

// Pool describes a pool to plan: its drives, scheme and layout.
type Pool struct {
	Drives     int   // number of drives, at least K+M (plus Preservation if grouped)
	DriveBytes int64 // capacity of each drive
	// Speed is the drive model (chunkstore.ModelByName, scaled or not, or
	// one of the user's): each I/O occupies a drive for
	// SpeedModel.Service of its size.
	Speed  chunkstore.SpeedModel
	K, M   int
	Layout placement.Layout
	// Preservation is the drives' worth of capacity kept for rebuild (the
	// hot spares of the grouped layout); 0 means
	// clustermap.DefaultPreservation(Drives), negative means none.
	Preservation int
	// Unit is the stripe unit in bytes (a fragment holds one unit); 0
	// means 1 MiB.
	Unit int
	// PGs is the number of placement groups; 0 means
	// placement.DefaultPGs(Drives, K+M), what a new pool gets.
	PGs int
	// Servers, if positive, spreads the drives round-robin over that many
	// servers (a failure domain level); Enclosures, if positive, groups the
	// servers into that many enclosures (the level above).
	Servers, Enclosures int
}

// Validate rejects pools that cannot be planned.
func (p Pool) Validate() error {
	bad := func(f string, a ...any) error { return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(f, a...)) }
	switch {
	case p.K < 1 || p.M < 0:
		return bad("scheme %d+%d: want k >= 1, m >= 0", p.K, p.M)
	case p.Drives < p.K+p.M+max(0, p.preservation()*boolInt(p.Layout == placement.Grouped)):
		return bad("%d drives cannot hold %d+%d stripes (with %d hot spares if grouped)", p.Drives, p.K, p.M, p.preservation())
	case p.DriveBytes <= 0:
		return bad("drive capacity %d: want > 0", p.DriveBytes)
	case p.Unit < 0 || p.Unit > 64<<20:
		return bad("unit %d: want 4 KiB to 64 MiB", p.Unit)
	case p.Servers < 0 || p.Enclosures < 0 || (p.Enclosures > 0 && p.Servers < p.Enclosures):
		return bad("%d servers in %d enclosures", p.Servers, p.Enclosures)
	}
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (p Pool) preservation() int {
	switch {
	case p.Preservation < 0:
		return 0
	case p.Preservation == 0:
		return clustermap.DefaultPreservation(p.Drives)
	}
	return p.Preservation
}

func (p Pool) unit() int {
	if p.Unit == 0 {
		return 1 << 20
	}
	return p.Unit
}

// fragmentBytes is the size of one full fragment on a drive (header
// included), what every rebuild read and write moves.
func (p Pool) fragmentBytes() int64 { return int64(erasure.FragmentSize(p.unit())) }

func (p Pool) pgs() int {
	if p.PGs > 0 {
		return p.PGs
	}
	return placement.DefaultPGs(p.Drives, p.K+p.M)
}

// driveDomain is the failure-domain path of drive i.
func (p Pool) driveDomain(i int) []string {
	if p.Servers <= 0 {
		return nil
	}
	s := i % p.Servers
	if p.Enclosures <= 0 {
		return []string{fmt.Sprintf("server%d", s)}
	}
	return []string{fmt.Sprintf("enclosure%d", s%p.Enclosures), fmt.Sprintf("server%d", s)}
}

// placementPool is the placement input of the pool with the drives of out
// marked Out: what the map authority builds (clustermap.Map.Placement).
func (p Pool) placementPool(out map[placement.DriveID]bool) *placement.Pool {
	pp := &placement.Pool{ID: 1, K: p.K, M: p.M, PGs: p.pgs(), Layout: p.Layout}
	if p.Layout == placement.Grouped {
		pp.Spares = p.preservation()
	}
	w := float64(p.DriveBytes) / (1 << 30)
	for i := range p.Drives {
		id := placement.DriveID(i)
		pp.Drives = append(pp.Drives, placement.Drive{ID: id, Weight: w, Domain: p.driveDomain(i), Out: out[id]})
	}
	return pp
}

// clusterMap is the cluster map of the pool, every drive up: the input of
// the capacity code that `poolfs status` uses.
func (p Pool) clusterMap() *clustermap.Map {
	m := &clustermap.Map{Epoch: 1, Name: "plan"}
	cp := clustermap.Pool{ID: 1, Name: "plan", K: p.K, M: p.M, Unit: uint32(p.unit()), PGs: p.pgs(),
		Layout: p.Layout, Preservation: p.preservation()}
	for i := range p.Drives {
		id := placement.DriveID(i)
		m.Drives = append(m.Drives, clustermap.Drive{ID: id, Capacity: p.DriveBytes, Domain: p.driveDomain(i),
			State: clustermap.StateUp, Pool: 1})
		cp.Drives = append(cp.Drives, id)
	}
	m.Pools = []clustermap.Pool{cp}
	return m
}
