package placement

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestServersAndEnclosuresHoldAtMostM is the property behind surviving the
// loss of a whole storage server: over random topologies of the shape that
// storage servers register (domain path {rack, enclosure, server}, racks
// and enclosures labelled or not, uneven drive counts and weights, some
// drives out), every PG holds at most M fragments (1 when M = 0) on one
// server, and on one enclosure where enclosures are labelled, whenever the
// up drives allow it: sum over the domains of min(up drives, M) >= K+M.
func TestServersAndEnclosuresHoldAtMostM(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 4))
	for iter := range 300 {
		k, m := 1+r.IntN(10), r.IntN(4)
		servers := 1 + r.IntN(10)
		labelled := r.IntN(2) == 0
		enclosures := 1 + r.IntN(4)
		p := &Pool{ID: 1, K: k, M: m}
		for s := range servers {
			enc := ""
			if labelled {
				enc = fmt.Sprintf("e%d", s%enclosures)
			}
			for range 1 + r.IntN(6) {
				id := DriveID(len(p.Drives))
				p.Drives = append(p.Drives, Drive{ID: id, Weight: 0.5 + r.Float64()*3,
					Domain: []string{"", enc, fmt.Sprintf("s%d", s)}, Out: r.IntN(8) == 0})
			}
		}
		up := 0
		for _, d := range p.Drives {
			if !d.Out {
				up++
			}
		}
		if up < k+m {
			continue
		}
		p.PGs = 128
		pl, err := p.Placer()
		if err != nil {
			t.Fatalf("iteration %d: %v", iter, err)
		}
		pm := pl.Map()
		limit := max(m, 1)
		for level, name := range map[int]string{1: "enclosure", 2: "server"} {
			if level == 1 && !labelled {
				continue
			}
			domain := func(d Drive) string { return domainKey(d.Domain, level) }
			count := map[string]int{}
			for _, d := range p.Drives {
				if !d.Out {
					count[domain(d)]++
				}
			}
			room := 0
			for _, n := range count {
				room += min(n, limit)
			}
			if room < k+m {
				continue // the topology does not allow it
			}
			byID := map[DriveID]Drive{}
			for _, d := range p.Drives {
				byID[d.ID] = d
			}
			for pg, set := range pm.Sets {
				per := map[string]int{}
				for _, id := range set {
					if per[domain(byID[id])]++; per[domain(byID[id])] > limit {
						t.Fatalf("iteration %d (%d+%d, %d servers, enclosures %v): PG %d puts %d fragments on %s %s, at most %d allowed: %v",
							iter, k, m, servers, labelled, pg, per[domain(byID[id])], name, domain(byID[id]), limit, idsString(set))
					}
				}
			}
		}
	}
}
