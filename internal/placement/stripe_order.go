package placement

import (
	"math/bits"
	"strings"
)

// stripeOrderWindow is how many not yet ordered PGs (in a fixed
// pseudo-random order) the greedy walk of NewStripeOrder weighs at each
// step. Larger is more even and slower: 32 keeps every server of the
// property test within a few fragments of its share.
const stripeOrderWindow = 32

// seedStart separates the hash of a file's first position in the order
// from the other hashes of the package.
const seedStart = 0x57a1f7e5eed0f11e

// StripeOrder places a file's consecutive stripes on consecutive PGs of a
// cycle through every PG of a PGMap, arranged so that any run of
// consecutive PGs puts fragments on every server (deepest failure domain)
// in proportion to its share of the map's slots, as far as the PG sets
// allow: Lustre's round-robin of a file's objects over OSTs, on the
// declustered map. Drives within a server are left to the PG sets (straw2),
// as before: balancing drives too made a shared file written by four tasks
// from segments 48 stripes apart write a quarter slower over six servers
// (bench/scaling.sh), and a server's link, not its drives, bounds it there. Stripe s of file ino goes to
// Cycle[(start(ino) + s) mod PGs] (StripeOrder.PG).
//
// The cycle is a pure function of the PGMap (its sets and drive domains),
// so every process derives the same order from the same epoch. It changes
// with the map, which is why a stripe's PG is stored in its record when it
// is written and never recomputed to read it. The PG sets themselves are
// not touched: the fragments a server may hold of one stripe and the spread
// of a rebuild stay what straw2 gives.
type StripeOrder struct {
	poolID uint32
	// Cycle holds every PG exactly once.
	Cycle []uint32
}

// NewStripeOrder builds the cycle of pm's PGs greedily. Every server gets a
// target share: its share of the map's fragment slots. Each step takes,
// among stripeOrderWindow PGs not yet taken drawn pseudo-randomly (a fresh
// draw each step, so that PGs passed over do not pile up in the window),
// the PG whose fragments' servers are furthest behind their targets so far. Every prefix of the
// cycle is then within a few fragments of its target per server, so is
// every run of consecutive PGs (the difference of two prefixes), and the
// whole cycle is exact (it uses every PG once). Costs PGs ×
// stripeOrderWindow × width steps: a few milliseconds for 16,384 PGs of
// width 3, about 50 ms for 65,536 of width 10.
func NewStripeOrder(pm *PGMap) *StripeOrder {
	n := len(pm.Sets)
	o := &StripeOrder{poolID: pm.Pool.ID, Cycle: make([]uint32, n)}
	if n == 0 {
		return o
	}
	// Servers (the full domain path) as dense indexes, by drive.
	drv := map[DriveID]int{}
	srvOf := []int{}
	srvIdx := map[string]int{}
	for _, d := range pm.Pool.Drives {
		key := strings.Join(d.Domain, "\x00")
		s, ok := srvIdx[key]
		if !ok {
			s = len(srvIdx)
			srvIdx[key] = s
		}
		drv[d.ID] = len(srvOf)
		srvOf = append(srvOf, s)
	}
	// Slot indexes of each PG's fragments, and the totals that set the
	// targets.
	frag := make([][]int32, n)
	srvSlots := make([]float64, len(srvIdx))
	total := 0.0
	for pg, set := range pm.Sets {
		f := make([]int32, 0, len(set))
		for _, id := range set {
			if d, ok := drv[id]; ok {
				f = append(f, int32(d))
				srvSlots[srvOf[d]]++
				total++
			}
		}
		frag[pg] = f
	}
	// Per PG taken, a server's target grows by its share of the slots
	// per PG; its deficit is target minus fragments given so far.
	srvRate := make([]float64, len(srvSlots))
	for s, c := range srvSlots {
		srvRate[s] = c / float64(n)
	}
	srvGot := make([]float64, len(srvSlots))

	perm := make([]uint32, n)
	for i := range perm {
		perm[i] = uint32(i)
	}
	seed := mix64(seedStart ^ uint64(pm.Pool.ID))
	for i := n - 1; i > 0; i-- { // Fisher–Yates, splitmix64 stream
		hi, _ := bits.Mul64(mix64(seed+uint64(i)*golden), uint64(i+1))
		perm[i], perm[hi] = perm[hi], perm[i]
	}
	for t := range n {
		steps := float64(t + 1)
		best, bestScore := t, 0.0
		left := uint64(n - t)
		for c := range min(stripeOrderWindow, n-t) {
			j := t + c
			if left > stripeOrderWindow {
				hi, _ := bits.Mul64(mix64(seed^uint64(t)*golden+uint64(c)), left)
				j = t + int(hi)
			}
			score := 0.0
			for _, d := range frag[perm[j]] {
				s := srvOf[d]
				score += steps*srvRate[s] - srvGot[s]
			}
			if c == 0 || score > bestScore {
				best, bestScore = j, score
			}
		}
		perm[t], perm[best] = perm[best], perm[t]
		for _, d := range frag[perm[t]] {
			srvGot[srvOf[d]]++
		}
	}
	copy(o.Cycle, perm)
	return o
}

// PG returns the PG of stripe `stripe` of file ino: consecutive stripes
// take consecutive PGs of the cycle, from a start that a hash of (pool,
// ino) picks, so files written at once start at unrelated places.
func (o *StripeOrder) PG(ino, stripe uint64) uint32 {
	n := uint64(len(o.Cycle))
	if n == 0 {
		panic("placement: StripeOrder of a map without PGs")
	}
	h := mix64(mix64(seedStart^uint64(o.poolID)) ^ ino)
	start, _ := bits.Mul64(h, n)
	return o.Cycle[(start+stripe%n)%n]
}
