package placement

import (
	"fmt"
	"slices"
	"testing"
)

// TestPGsOfMatchesMap checks PGsOf against the sets of Map for every drive
// of pools with and without failure domains, weights and Out drives, and
// for the grouped layout.
func TestPGsOfMatchesMap(t *testing.T) {
	mk := func(n, servers int, layout Layout, spares int, weight func(i int) float64, out ...int) *Pool {
		p := &Pool{ID: 7, K: 4, M: 2, PGs: 256, Layout: layout, Spares: spares}
		for i := range n {
			d := Drive{ID: DriveID(i), Weight: weight(i), Out: slices.Contains(out, i)}
			if servers > 0 {
				d.Domain = []string{fmt.Sprintf("s%d", i%servers)}
			}
			p.Drives = append(p.Drives, d)
		}
		return p
	}
	one := func(int) float64 { return 1 }
	mixed := func(i int) float64 { return 1 + float64(i%3)/2 }
	for _, tc := range []struct {
		name string
		pool *Pool
	}{
		{"declustered", mk(40, 0, Declustered, 0, one)},
		{"declustered weighted, one out", mk(40, 0, Declustered, 0, mixed, 5)},
		{"declustered with servers", mk(40, 8, Declustered, 0, one)},
		{"grouped with spares, one out", mk(40, 0, Grouped, 2, one, 3)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pl, err := tc.pool.Placer()
			if err != nil {
				t.Fatal(err)
			}
			m := pl.Map()
			for _, d := range tc.pool.Drives {
				var want []uint32
				for pg, set := range m.Sets {
					if slices.Contains(set, d.ID) {
						want = append(want, uint32(pg))
					}
				}
				if got := pl.PGsOf(d.ID); !slices.Equal(got, want) {
					t.Fatalf("drive %v: PGsOf = %d PGs, Map has it in %d (first %v / %v)", d.ID, len(got), len(want), head(got), head(want))
				}
			}
		})
	}
}

func head(s []uint32) []uint32 { return s[:min(len(s), 5)] }
