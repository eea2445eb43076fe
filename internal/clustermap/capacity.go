package clustermap

import "poolfs/internal/placement"

// DefaultPreservation is the number of drives' worth of capacity a pool of n
// drives keeps free for rebuilds when the operator does not choose. It follows
// the defaults of NetApp E-Series Dynamic Disk Pools, which the reference
// evaluations used (a 60-drive pool reserves 3, a 64-drive pool 4):
//
//	drives   11    12–31  32–63  64–127  128–191  192–255  256–383  384+
//	reserve   1      2      3      4        6        7        8      10
func DefaultPreservation(n int) int {
	switch {
	case n <= 11:
		return 1
	case n < 32:
		return 2
	case n < 64:
		return 3
	case n < 128:
		return 4
	case n < 192:
		return 6
	case n < 256:
		return 7
	case n < 384:
		return 8
	default:
		return 10
	}
}

// Capacity is a pool's capacity in bytes.
type Capacity struct {
	Raw          int64 `json:"raw"`          // sum of drive capacities
	Preservation int64 `json:"preservation"` // raw bytes kept free for rebuild
	UsableRaw    int64 `json:"usable_raw"`   // raw bytes data may occupy (data + parity)
	Usable       int64 `json:"usable"`       // user bytes that fit: UsableRaw × k/(k+m)
}

// PoolCapacity computes a pool's capacity. UsableRaw is the sum of the
// drives' write limits (WriteLimits; for the grouped layout, the drives
// that are not hot spares), Preservation the rest of Raw, and Usable =
// UsableRaw × k/(k+m). Drives taken out of the pool do not count; failed
// ones do (their data is rebuilt into the preservation capacity).
func (m *Map) PoolCapacity(poolID uint32) (Capacity, error) {
	p, err := m.Pool(poolID)
	if err != nil {
		return Capacity{}, err
	}
	limits, err := m.WriteLimits(poolID)
	if err != nil {
		return Capacity{}, err
	}
	var c Capacity
	var n int64
	for _, id := range p.Drives {
		d, err := m.Drive(id)
		if err != nil {
			return Capacity{}, err
		}
		if d.State == StateOut {
			continue
		}
		c.Raw += d.Capacity
		c.UsableRaw += limits[id]
		n++
	}
	if n == 0 {
		return c, nil
	}
	if p.Layout == placement.Grouped {
		// Hot spares take no data: preservation is counted in drives of
		// the mean size.
		c.UsableRaw = c.Raw - min(int64(p.Preservation)*(c.Raw/n), c.Raw)
	}
	c.Preservation = c.Raw - c.UsableRaw
	c.Usable = c.UsableRaw / int64(p.K+p.M) * int64(p.K)
	return c, nil
}

// OnUp sums per (bytes by drive, as meta.GCItemBytes gives them) over the
// drives that are up, and returns it with the up drives' capacity: how
// much of what the drives can hold some queue takes.
func (m *Map) OnUp(per map[uint32]int64) (bytes, capacity int64) {
	for id, n := range per {
		if d, err := m.Drive(placement.DriveID(id)); err == nil && d.State == StateUp {
			bytes += n
		}
	}
	for _, d := range m.Drives {
		if d.State == StateUp {
			capacity += d.Capacity
		}
	}
	return bytes, capacity
}
