package main

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// The metadata benchmark compares the create rate with pgbench's at the
// same moment: this machine's load changes within seconds, so each point
// runs pgbench and mdtest alternately, pgbench right before each mdtest
// (whose first timed phase is the creates), both for about metaSeconds,
// and takes the median of the pairs' ratios.
const (
	metaRounds    = 3   // counted pairs per point
	metaSeconds   = 3   // pgbench -T, and the create phase's target length
	metaWarmItems = 200 // files per task of the uncounted first mdtest run
	metaMinItems  = 100 // bounds of the files per task of a counted run
	metaMaxItems  = 4000
)

// metaPair is one pgbench run and the mdtest run right after it.
type metaPair struct {
	PGBench       float64            `json:"pgbench_tps"`
	Items         int                `json:"files_per_task"`
	CreateSeconds float64            `json:"create_seconds"`
	Rate          map[string]float64 `json:"ops_per_s"` // by mdtest phase
}

// metaPoint is one (client hosts, meta servers) point: its pairs and
// their medians.
type metaPoint struct {
	Hosts   int        `json:"client_hosts"`
	Meta    int        `json:"meta_servers"`
	Clients int        `json:"clients"`
	Pairs   []metaPair `json:"pairs"`
	// Medians over the pairs; Ratio is the median of the pairs' create
	// rate / pgbench tps, RatioMin and RatioMax their extremes.
	Rate                      map[string]float64 `json:"ops_per_s"`
	PGBench                   float64            `json:"pgbench_tps"`
	Ratio, RatioMin, RatioMax float64
}

// metaItems is the number of files per task that makes a create phase of
// n tasks last about metaSeconds at rate creates/s, within bounds.
func metaItems(rate float64, n int) int {
	if !(rate > 0) || n < 1 {
		return metaMinItems
	}
	items := int(math.Round(rate * metaSeconds / float64(n)))
	return min(max(items, metaMinItems), metaMaxItems)
}

// median of v (the mean of the middle two for an even count); 0 if empty.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(v))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// summarize sets the medians of p's pairs.
func (p *metaPoint) summarize() {
	p.Rate = map[string]float64{}
	var ratios, tps []float64
	phases := map[string][]float64{}
	for _, pr := range p.Pairs {
		for ph, r := range pr.Rate {
			phases[ph] = append(phases[ph], r)
		}
		tps = append(tps, pr.PGBench)
		if pr.PGBench > 0 {
			ratios = append(ratios, pr.Rate["file-create"]/pr.PGBench)
		}
	}
	for ph, v := range phases {
		p.Rate[ph] = median(v)
	}
	p.PGBench, p.Ratio = median(tps), median(ratios)
	if len(ratios) > 0 {
		p.RatioMin, p.RatioMax = slices.Min(ratios), slices.Max(ratios)
	}
}

// parseMetaPoints parses POOLFS_SCALING_META_POINTS: comma-separated
// HOSTSxSERVERS pairs ("1x1,2x2"), each count 1 to 4.
func parseMetaPoints(v string) ([][2]int, error) {
	var pts [][2]int
	for _, f := range strings.Split(v, ",") {
		h, m, ok := strings.Cut(strings.TrimSpace(f), "x")
		hosts, err1 := strconv.Atoi(h)
		meta, err2 := strconv.Atoi(m)
		if !ok || err1 != nil || err2 != nil || hosts < 1 || hosts > 4 || meta < 1 || meta > 4 {
			return nil, fmt.Errorf("point %q: want HOSTSxSERVERS, each 1 to 4 (1x1,2x2)", f)
		}
		pts = append(pts, [2]int{hosts, meta})
	}
	return pts, nil
}
