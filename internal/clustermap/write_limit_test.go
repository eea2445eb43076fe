package clustermap

import (
	"testing"

	"poolfs/internal/erasure"
	"poolfs/internal/placement"
)

func limitMap(n, preservation int, size int64, layout placement.Layout) *Map {
	m := &Map{}
	p := Pool{ID: 0, Name: "default", K: 8, M: 2, Unit: 1 << 20, PGs: placement.DefaultPGs(n, 10),
		Layout: layout, Preservation: preservation}
	for i := 0; i < n; i++ {
		id := placement.DriveID(i)
		m.Drives = append(m.Drives, Drive{ID: id, Capacity: size, State: StateUp})
		p.Drives = append(p.Drives, id)
	}
	m.Pools = []Pool{p}
	return m
}

// TestWriteLimits: every drive's client limit is below the mean rule
// (drives − preservation)/drives by the rebuild's spread margin, which is
// wide for drives of few fragments and narrow for large drives; a pool
// without preservation and a grouped pool limit drives to their capacity;
// PoolCapacity's usable space is the sum of the limits.
func TestWriteLimits(t *testing.T) {
	for _, tc := range []struct {
		name       string
		n, p       int
		size       int64
		layout     placement.Layout
		minR, maxR float64 // limit / capacity
	}{
		{"24x256MiB", 24, 2, 256 << 20, placement.Declustered, 0.80, 0.85},
		{"24x1TiB", 24, 2, 1 << 40, placement.Declustered, 0.87, 0.9167},
		{"60x1TiB", 60, 3, 1 << 40, placement.Declustered, 0.91, 0.95},
		{"no-preservation", 12, 0, 1 << 30, placement.Declustered, 1, 1},
		{"grouped", 23, 3, 1 << 30, placement.Grouped, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := limitMap(tc.n, tc.p, tc.size, tc.layout)
			limits, err := m.WriteLimits(0)
			if err != nil {
				t.Fatal(err)
			}
			if len(limits) != tc.n {
				t.Fatalf("%d limits for %d drives", len(limits), tc.n)
			}
			var sum int64
			for id, l := range limits {
				r := float64(l) / float64(tc.size)
				if r < tc.minR || r > tc.maxR || l%erasure.Align != 0 {
					t.Fatalf("drive %v limit %d = %.4f of capacity, want %.4f..%.4f, aligned", id, l, r, tc.minR, tc.maxR)
				}
				sum += l
			}
			c, err := m.PoolCapacity(0)
			if err != nil {
				t.Fatal(err)
			}
			if tc.layout == placement.Declustered && c.UsableRaw != sum {
				t.Fatalf("usable raw %d, sum of limits %d", c.UsableRaw, sum)
			}
			if tc.layout == placement.Grouped && c.UsableRaw != int64(tc.n-tc.p)*tc.size {
				t.Fatalf("grouped usable raw %d, want %d drives", c.UsableRaw, tc.n-tc.p)
			}
			if c.Raw != c.UsableRaw+c.Preservation {
				t.Fatalf("capacity %+v does not add up", c)
			}
		})
	}
}

// TestLimitRatioMeanRule: with a spread of zero units of doubt (many
// fragments and PGs) the rule tends to the mean rule (n−P)/n, and it
// never allows more.
func TestLimitRatioMeanRule(t *testing.T) {
	for _, n := range []int{11, 24, 100, 500} {
		for p := 1; p <= 4 && p < n-10; p++ {
			r := limitRatio(1<<50, 4096, 1e15, n, p)
			mean := float64(n-p) / float64(n)
			if r > mean || r < mean-0.01 {
				t.Fatalf("n=%d P=%d: ratio %.4f, mean rule %.4f", n, p, r, mean)
			}
		}
	}
}
