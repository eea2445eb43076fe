package plan

import (
	"poolfs/internal/placement"
)

// Capacity is one row of a capacity table, in bytes. Raw = Usable +
// Parity + Preservation + Unused.
type Capacity struct {
	Pool         Pool
	Raw          int64 // every drive's capacity
	Preservation int64 // kept free for rebuild (hot spares when grouped)
	Unused       int64 // grouped: drives left over that fill no group
	Usable       int64 // user bytes that fit
	Parity       int64 // parity of the usable bytes
	// Efficiency is Usable/Raw; Overhead is 1 - Efficiency.
	Efficiency, Overhead float64
	// DomainLoss reports whether losing any one domain of the top level
	// (server, or enclosure if given) loses at most M fragments of any
	// stripe, so no data; false when there are no domains or the topology
	// is too small for the scheme.
	DomainLoss bool
}

// CapacityOf computes a pool's capacity with the code `poolfs status`
// uses (clustermap.Map.PoolCapacity, which honours the preservation
// capacity and each drive's write limit), and the grouped layout's unused
// drives from the placement package.
func CapacityOf(p Pool) (Capacity, error) {
	if err := p.Validate(); err != nil {
		return Capacity{}, err
	}
	m := p.clusterMap()
	c, err := m.PoolCapacity(1)
	if err != nil {
		return Capacity{}, err
	}
	out := Capacity{Pool: p, Raw: c.Raw}
	usableRaw := c.UsableRaw
	pp := p.placementPool(nil)
	if p.Layout == placement.Grouped {
		out.Unused = int64(len(pp.Unused())) * p.DriveBytes
		usableRaw -= out.Unused // leftover drives take no stripes
	}
	out.Usable = usableRaw / int64(p.K+p.M) * int64(p.K)
	out.Parity = usableRaw - out.Usable
	out.Preservation = out.Raw - out.Usable - out.Parity - out.Unused
	out.Efficiency = float64(out.Usable) / float64(out.Raw)
	out.Overhead = 1 - out.Efficiency
	if p.Servers > 0 && p.Layout == placement.Declustered {
		pl, err := pp.Placer()
		if err != nil {
			return Capacity{}, err
		}
		out.DomainLoss = len(pl.EnforcedLevels()) > 0 && pl.EnforcedLevels()[0] == 0
	}
	return out, nil
}
