package clustermap

import (
	"math"

	"poolfs/internal/erasure"
	"poolfs/internal/placement"
)

// The rebuild of a failed drive writes each of its fragments onto one
// survivor: the drive that takes its place in the fragment's placement
// group. A pool keeps its preservation promise (it rebuilds Preservation
// failures one after another, however full it was written) only if no
// survivor runs out of room on the way, so what limits the pool is the
// fullest drive, not the mean. WriteLimits bounds every drive's client
// writes so that it holds even for the fullest:
//
// Let a drive hold at most L fragment bytes (header included: drives count
// what they store) when the first drive fails, in a pool of n drives.
// Failure j (j = 1 … P) leaves s = n − j survivors and spreads the failed
// drive's bytes, at most L_j (every drive's bound before failure j), over
// them. A survivor's share is 1/s on average; it is a sum of independent
// units (placement groups, or fragments when there are fewer of those), so
// with g units per survivor on average its share stays below
// (1 + z/√g)/s with z = rebuildSpreadZ standard deviations. Thus
//
//	L_{j+1} = L_j × (1 + (1 + z/√g_j)/s),    g_j = min(L_j/F, slots/(n−j+1)) / s
//
// with F the fragment size of a full stripe unit and slots the pool's
// PGs × (k+m) fragment slots, and the rule is L_{P+1} ≤ capacity. With
// z = 0 this is the mean rule L = capacity × (n−P)/n; the z/√g term is the
// margin the rebuild's uneven spread needs. It is large only where a drive
// holds few fragments (a 256 MiB drive of 1 MiB units holds ~250, so its
// survivors each take ~10, ± 3) and fades on real drives (millions of
// fragments; then the PG count bounds g). A client write that would take a
// drive past its limit fails with chunkstore.ErrFull, which the client
// reports as pool full; rebuild writes may use the drive to its capacity.
//
// Segment record headers and preallocated segment space are not counted:
// drives do not count them against their capacity either (chunkstore), so
// they take host space, not pool capacity.
const rebuildSpreadZ = 4

// WriteLimits returns, for every drive of a pool that is not out, the most
// bytes of fragments client writes may fill it to (see the comment above).
// Rebuild and resync writes are not limited. A pool without preservation,
// and the grouped layout (whose hot spares, not the data drives, take a
// rebuild), limit drives to their capacity.
func (m *Map) WriteLimits(poolID uint32) (map[placement.DriveID]int64, error) {
	p, err := m.Pool(poolID)
	if err != nil {
		return nil, err
	}
	out := map[placement.DriveID]int64{}
	var n, sum int64
	for _, id := range p.Drives {
		d, err := m.Drive(id)
		if err != nil {
			return nil, err
		}
		if d.State != StateOut {
			out[id] = d.Capacity
			n++
			sum += d.Capacity
		}
	}
	if n == 0 || p.Preservation <= 0 || p.Layout == placement.Grouped {
		return out, nil
	}
	frag := float64(erasure.FragmentSize(int(p.Unit)))
	slots := float64(p.PGs) * float64(p.K+p.M)
	mean := float64(sum) / float64(n)
	ratio := limitRatio(mean, frag, slots, int(n), p.Preservation)
	for id, c := range out {
		out[id] = int64(float64(c)*ratio) / erasure.Align * erasure.Align
	}
	return out, nil
}

// limitRatio returns the largest L/capacity (to 1/1024) for which P
// failures in a row, each spread as the comment above says, leave every
// drive within capacity.
func limitRatio(capacity, frag, slots float64, n, p int) float64 {
	fits := func(l float64) bool {
		for j := 1; j <= p; j++ {
			s := float64(n - j)
			if s <= 0 {
				return false
			}
			units := math.Min(l/frag, slots/float64(n-j+1)) / s
			l *= 1 + (1+rebuildSpreadZ/math.Sqrt(math.Max(units, 1)))/s
		}
		return l <= capacity
	}
	lo, hi := 0, 1024
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if fits(capacity * float64(mid) / 1024) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return float64(lo) / 1024
}
