package placement

import (
	"slices"
	"testing"
)

func TestFailureDomains(t *testing.T) {
	tests := []struct {
		name     string
		pool     *Pool
		enforced []int // levels expected to be enforced
	}{
		// 6 servers × min(10, 2) = 12 >= 10: at most 2 fragments per server.
		{"60/8+2/6 servers of 10", withDomains(newPool(8, 2, 60), 6, 10), []int{0}},
		// 2 servers × min(6, 2) = 4 < 10: infeasible, only distinct drives.
		{"12/8+2/2 servers of 6", withDomains(newPool(8, 2, 12), 2, 6), nil},
		// Enclosures: 3 × min(20, 3) = 9 < 11, not enforced; drawers: 12 × 3 = 36, enforced.
		{"60/8+3/3 enc × 4 drawers × 5", withDomains(newPool(8, 3, 60), 3, 4, 5), []int{1}},
		// Enclosures: 4 × min(15, 2) = 8 < 10; drawers 12 × 2 = 24.
		{"60/8+2/4 enc × 3 drawers × 5", withDomains(newPool(8, 2, 60), 4, 3, 5), []int{1}},
		// Exactly feasible: 5 servers × 2 = 10, so every server holds exactly 2.
		{"10/8+2/5 servers of 2", withDomains(newPool(8, 2, 10), 5, 2), []int{0}},
		// m = 0: limit 1 where 4 servers can hold 4 fragments.
		{"12/4+0/4 servers of 3", withDomains(newPool(4, 0, 12), 4, 3), []int{0}},
		// 16+4 over 12 servers of 20 and 4 drawers of 5: both levels feasible.
		{"240/16+4/12 servers × 4 drawers × 5", withDomains(newPool(16, 4, 240), 12, 4, 5), []int{0, 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.pool.PGs = 4096 // placement rules hold per PG; TestBalance covers balance with domains
			pl, err := tc.pool.Placer()
			if err != nil {
				t.Fatal(err)
			}
			if got := pl.EnforcedLevels(); !slices.Equal(got, tc.enforced) {
				t.Fatalf("EnforcedLevels() = %v, want %v", got, tc.enforced)
			}
			checkMap(t, tc.pool, pl.Map())
		})
	}
}

// TestDomainPaths covers uneven paths: a missing component is the empty
// string, so drives without a path share one domain.
func TestDomainPaths(t *testing.T) {
	if a, b := domainKey(nil, 0), domainKey([]string{""}, 0); a != b {
		t.Errorf("empty path and {\"\"} differ at level 0: %q, %q", a, b)
	}
	if a, b := domainKey([]string{"s1", "e0"}, 1), domainKey([]string{"s2", "e0"}, 1); a == b {
		t.Errorf("e0 of s1 and e0 of s2 are one domain: %q", a)
	}
	// Four servers of two drives plus four drives without a path: level 0
	// holds 4×2 + min(4, 2) = 10 fragments, so 8+2 is enforced, and at most
	// two fragments of a PG land on the path-less drives.
	p := withDomains(newPool(8, 2, 12), 6, 2)
	for i := 8; i < 12; i++ {
		p.Drives[i].Domain = nil
	}
	p.PGs = 1024
	m, err := p.Map()
	if err != nil {
		t.Fatal(err)
	}
	checkMap(t, p, m)
	pl, _ := p.Placer()
	if got := pl.EnforcedLevels(); !slices.Equal(got, []int{0}) {
		t.Errorf("EnforcedLevels() = %v, want [0]", got)
	}
}

// TestRelax forces an infeasible level on the Placer (as a future change or
// a bug might) and checks that straw2 relaxes it instead of failing.
func TestRelax(t *testing.T) {
	p := withDomains(newPool(8, 2, 12), 2, 6)
	p.PGs = 256
	pl, err := p.Placer()
	if err != nil {
		t.Fatal(err)
	}
	pl.enforced = []int{0} // 2 servers × 2 < 10: the greedy walk must fail
	m := pl.Map()
	if len(m.Degraded) != 0 {
		t.Fatalf("%d degraded PGs, want relaxation to place all", len(m.Degraded))
	}
	for pg, set := range m.Sets {
		if len(set) != 10 || len(slices.Compact(slices.Sorted(slices.Values(set)))) != 10 {
			t.Fatalf("pg %d: %s, want 10 distinct drives", pg, idsString(set))
		}
	}
}

func shareRange(m *PGMap) (lo, hi float64) {
	lo = 2
	for _, s := range m.Shares() {
		lo, hi = min(lo, s), max(hi, s)
	}
	return lo, hi
}
