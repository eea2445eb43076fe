package plan

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"poolfs/internal/placement"
	"poolfs/internal/recovery"
)

// hashedStripes is how many stripes the simulation places one by one with
// placement.PGOf; a larger fill is sampled per PG (Poisson counts).
const hashedStripes = 4 << 20

// DefaultSimStripes bounds the stripes the simulation plans and runs; each
// simulated stripe then stands for several real ones of its PG.
const DefaultSimStripes = 20000

// failure is the state of a pool after some of its drives failed, as the
// rebuild planner sees it.
type failure struct {
	in     recovery.Input
	weight []float64 // real stripes per simulated stripe, by compact PG index
	pgs    int       // PGs of the pool
	hit    int       // PGs holding a failed drive
	real   float64   // real stripes that lost a fragment
	failed []placement.DriveID
	spares map[placement.DriveID]bool // up drives that held nothing before
}

// failedDrives are the drives a simulation fails: d03 (the drive `poolfs
// bench rebuild` fails), then d04, ... (in the grouped layout, drives of
// the same group when it is wide enough: the worst case).
func failedDrives(p Pool, n int) []placement.DriveID {
	var out []placement.DriveID
	first := min(3, p.Drives-n)
	for i := range n {
		out = append(out, placement.DriveID(first+i))
	}
	return out
}

// fail builds the planner input after the failure of n drives of a pool
// holding fill user bytes: the PG sets of the new epoch (placement with
// the failed drives Out), and the stripes of the PGs that held a failed
// drive, at most budget of them (each standing for weight real stripes).
func fail(p Pool, n int, fill int64, budget int) (*failure, error) {
	f := &failure{failed: failedDrives(p, n), pgs: p.pgs(), spares: map[placement.DriveID]bool{}}
	out := map[placement.DriveID]bool{}
	for _, d := range f.failed {
		out[d] = true
	}
	before, err := p.placementPool(nil).Placer()
	if err != nil {
		return nil, err
	}
	after, err := p.placementPool(out).Placer()
	if err != nil {
		return nil, err
	}
	var hit []uint32
	for _, d := range f.failed {
		hit = append(hit, before.PGsOf(d)...)
	}
	slices.Sort(hit)
	hit = slices.Compact(hit)
	f.hit = len(hit)
	// Real stripes per hit PG.
	unit := int64(p.unit())
	total := (fill + int64(p.K)*unit - 1) / (int64(p.K) * unit)
	count := make([]float64, len(hit))
	if total <= hashedStripes {
		idx := make([]int32, f.pgs)
		for i := range idx {
			idx[i] = -1
		}
		for i, pg := range hit {
			idx[pg] = int32(i)
		}
		for s := range uint64(total) {
			if i := idx[placement.PGOf(1, 2, s, f.pgs)]; i >= 0 {
				count[i]++
			}
		}
	} else {
		rng := rand.New(rand.NewPCG(uint64(p.Drives), uint64(total)))
		mean := float64(total) / float64(f.pgs)
		for i := range count {
			count[i] = poisson(rng, mean)
		}
	}
	for _, c := range count {
		f.real += c
	}
	scale := max(1, f.real/float64(max(budget, 1)))
	f.in = recovery.Input{K: p.K, M: p.M, Up: map[placement.DriveID]bool{}}
	held := map[placement.DriveID]bool{}
	for i, pg := range hit {
		old, err := before.PGDrives(pg)
		if err != nil {
			return nil, fmt.Errorf("placement before the failure, pg %d: %w", pg, err)
		}
		set, _ := after.PGDrives(pg) // grouped without a spare: the stripes stay Blocked
		f.in.Sets = append(f.in.Sets, set)
		sim := 0
		if count[i] > 0 {
			sim = max(1, int(math.Round(count[i]/scale)))
			f.weight = append(f.weight, count[i]/float64(sim))
		} else {
			f.weight = append(f.weight, 0)
		}
		for j := range sim {
			// Ordered by (Ino, Stripe): round robin over the PGs, as the
			// stripes of real files are hashed over them.
			f.in.Stripes = append(f.in.Stripes, recovery.Stripe{Ino: uint64(j), Stripe: uint64(i), Gen: 1,
				PG: uint32(i), Drives: old})
		}
		for _, d := range old {
			held[d] = true
		}
	}
	for i := range p.Drives {
		if d := placement.DriveID(i); !out[d] {
			f.in.Up[d] = true
		}
	}
	if p.Layout == placement.Grouped {
		for _, d := range p.placementPool(nil).HotSpares() {
			f.spares[d] = !out[d]
		}
	}
	return f, nil
}

// poisson draws a Poisson variate of the given mean (normal approximation
// above 50).
func poisson(rng *rand.Rand, mean float64) float64 {
	if mean > 50 {
		return max(0, math.Round(mean+math.Sqrt(mean)*rng.NormFloat64()))
	}
	l, k, p := math.Exp(-mean), 0.0, 1.0
	for {
		p *= rng.Float64()
		if p <= l {
			return k
		}
		k++
	}
}
