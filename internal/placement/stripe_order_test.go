package placement

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// stripeSpread returns, over nFiles files, the largest excess of a server's
// fragments among n consecutive stripes of one file (from a random first
// stripe) over its expected count (its share of pm's slots), in fragments.
func stripeSpread(pm *PGMap, pgOf func(ino, stripe uint64) uint32, n, nFiles int, r *rand.Rand) (srvWorst float64) {
	srvOf := map[DriveID]string{}
	for _, d := range pm.Pool.Drives {
		srvOf[d.ID] = strings.Join(d.Domain, "/")
	}
	srvShare := map[string]float64{}
	total := 0.0
	for _, set := range pm.Sets {
		for _, d := range set {
			srvShare[srvOf[d]]++
			total++
		}
	}
	for range nFiles {
		ino, first := r.Uint64(), uint64(r.IntN(1<<20))
		srv := map[string]float64{}
		frags := 0.0
		for s := first; s < first+uint64(n); s++ {
			for _, d := range pm.Sets[pgOf(ino, s)] {
				srv[srvOf[d]]++
				frags++
			}
		}
		for k, c := range srvShare {
			srvWorst = math.Max(srvWorst, srv[k]-frags*c/total)
		}
	}
	return srvWorst
}

// randomServerPool returns a declustered pool of 4 to 60 drives over 2 to 10
// servers (domain {"", "", server}), uneven drive counts, equal weights,
// and a k+m that fits at m per server.
func randomServerPool(r *rand.Rand) *Pool {
	servers := 2 + r.IntN(9)
	p := &Pool{ID: uint32(1 + r.IntN(100))}
	for s := range servers {
		per := 2 + r.IntN(5)
		for range per {
			if len(p.Drives) == 60 {
				break
			}
			p.Drives = append(p.Drives, Drive{ID: DriveID(len(p.Drives)), Weight: 1,
				Domain: []string{"", "", fmt.Sprintf("s%d", s)}})
		}
	}
	p.M = 1 + r.IntN(2)
	maxK := min(servers*p.M, len(p.Drives)) - p.M
	p.K = 1 + r.IntN(min(maxK, 8))
	p.PGs = DefaultPGs(len(p.Drives), p.Width())
	return p
}

// TestStripeOrderSpreadsConsecutiveStripes is the property behind writes
// that scale with servers: for pools of 4 to 60 drives over 2 to 10 servers,
// the N consecutive stripes of one file put on every server at most 5
// fragments more than its share, where N
// gives each server about 32 fragments, as one bench/scaling.sh point does.
// The uniform hash PGOf, which placed stripes before, gives the busiest
// server 10 to 20 more there (checked below, so the bound means something).
func TestStripeOrderSpreadsConsecutiveStripes(t *testing.T) {
	const bound = 5
	r := rand.New(rand.NewPCG(3, 9))
	oldWorst := 0.0
	for range 14 {
		p := randomServerPool(r)
		pm, err := p.Map()
		if err != nil {
			t.Fatal(err)
		}
		o := NewStripeOrder(pm)
		if got := len(o.Cycle); got != p.PGs {
			t.Fatalf("cycle of %d PGs, pool has %d", got, p.PGs)
		}
		seen := make([]bool, p.PGs)
		for _, pg := range o.Cycle {
			if seen[pg] {
				t.Fatalf("PG %d twice in the cycle", pg)
			}
			seen[pg] = true
		}
		servers := map[string]bool{}
		for _, d := range p.Drives {
			servers[d.Domain[2]] = true
		}
		n := 32 * len(servers) / p.Width()
		if srv := stripeSpread(pm, o.PG, n, 30, r); srv > bound {
			t.Errorf("%d drives over %d servers, %d+%d, %d stripes: busiest server %.1f fragments over its share; want <= %d",
				len(p.Drives), len(servers), p.K, p.M, n, srv, bound)
		}
		old := stripeSpread(pm, func(ino, s uint64) uint32 { return PGOf(p.ID, ino, s, p.PGs) }, n, 30, r)
		oldWorst = math.Max(oldWorst, old)
	}
	if oldWorst <= 2*bound {
		t.Errorf("the uniform hash's busiest server was only %.1f fragments over: the bound tests nothing", oldWorst)
	}
}

// TestStripeOrderIsAFunctionOfTheMap pins that two processes agree: the
// same map gives the same cycle, whatever the order of the pool's drives.
func TestStripeOrderIsAFunctionOfTheMap(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 1))
	p := randomServerPool(r)
	q := *p
	q.Drives = slices.Clone(p.Drives)
	slices.Reverse(q.Drives)
	a, err := p.Map()
	if err != nil {
		t.Fatal(err)
	}
	b, err := q.Map()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(NewStripeOrder(a).Cycle, NewStripeOrder(b).Cycle) {
		t.Fatal("the same pool in another drive order gave another cycle")
	}
	o := NewStripeOrder(a)
	if o.PG(7, 3) != o.Cycle[(slices.Index(o.Cycle, o.PG(7, 0))+3)%len(o.Cycle)] {
		t.Fatal("stripe 3 of a file is not three PGs after its stripe 0 in the cycle")
	}
}
