package main

import "testing"

// TestMetaPairs checks how the metadata benchmark sizes its create
// phases and compares each with the pgbench run beside it: the ratio is
// the median of the pairs' own ratios, not the ratio of the medians.
func TestMetaPairs(t *testing.T) {
	for _, c := range []struct {
		rate  float64
		n     int
		items int
	}{
		{2000, 4, 1500}, {4000, 16, 750}, {10, 4, metaMinItems}, {1e6, 4, metaMaxItems}, {0, 4, metaMinItems}, {1000, 0, metaMinItems},
	} {
		if got := metaItems(c.rate, c.n); got != c.items {
			t.Errorf("metaItems(%g, %d) = %d, want %d", c.rate, c.n, got, c.items)
		}
	}
	p := metaPoint{Pairs: []metaPair{
		{PGBench: 4000, Rate: map[string]float64{"file-create": 1000, "file-stat": 5000}}, // 0.25
		{PGBench: 2000, Rate: map[string]float64{"file-create": 1600, "file-stat": 3000}}, // 0.8
		{PGBench: 8000, Rate: map[string]float64{"file-create": 4000, "file-stat": 4000}}, // 0.5
	}}
	p.summarize()
	// The medians alone would give 1600 / 4000 = 0.4.
	if p.Ratio != 0.5 || p.RatioMin != 0.25 || p.RatioMax != 0.8 {
		t.Errorf("ratio %.2f (%.2f–%.2f), want 0.50 (0.25–0.80)", p.Ratio, p.RatioMin, p.RatioMax)
	}
	if p.PGBench != 4000 || p.Rate["file-create"] != 1600 || p.Rate["file-stat"] != 4000 {
		t.Errorf("medians: pgbench %.0f, creates %.0f, stats %.0f", p.PGBench, p.Rate["file-create"], p.Rate["file-stat"])
	}
	if m := median([]float64{3, 1, 4, 2}); m != 2.5 {
		t.Errorf("median of 4 values = %g, want 2.5", m)
	}
}

// TestParseMetaPoints checks POOLFS_SCALING_META_POINTS, which selects the
// metadata points to run.
func TestParseMetaPoints(t *testing.T) {
	got, err := parseMetaPoints("1x1, 2x2,4x1")
	if err != nil || len(got) != 3 || got[0] != [2]int{1, 1} || got[1] != [2]int{2, 2} || got[2] != [2]int{4, 1} {
		t.Errorf("parseMetaPoints(1x1, 2x2,4x1) = %v, %v", got, err)
	}
	for _, bad := range []string{"", "1", "1x", "x1", "0x1", "1x5", "5x1", "1x1,", "2*2"} {
		if got, err := parseMetaPoints(bad); err == nil {
			t.Errorf("parseMetaPoints(%q) = %v, want an error", bad, got)
		}
	}
}
