package plan

import (
	"errors"
	"math"
	"testing"

	"poolfs/internal/placement"
)

// TestMarkovMatchesMonteCarlo: with exponential rebuild windows and no
// enclosure failures both methods model the same process (also with one
// rebuild at a time and correlated drive failures), so the closed form
// must fall inside the Monte Carlo confidence interval (widened by 5% for
// the interval's own uncertainty).
func TestMarkovMatchesMonteCarlo(t *testing.T) {
	for _, tc := range []struct {
		name   string
		pool   Pool
		hours  []float64
		trials int
		serial bool
		corr   float64
	}{
		{"one RAID-6 group", Pool{Drives: 10, DriveBytes: 1e12, K: 8, M: 2, Layout: placement.Grouped, Preservation: -1}, []float64{24}, 60000, false, 0},
		// A second failure mostly hits another group: more excursions.
		{"60 drives grouped 8+2", Pool{Drives: 60, DriveBytes: 1e12, K: 8, M: 2, Layout: placement.Grouped}, []float64{24}, 300000, false, 0},
		{"60 drives declustered 8+2", Pool{Drives: 60, DriveBytes: 1e12, K: 8, M: 2}, []float64{3}, 60000, false, 0},
		{"240 drives declustered 4+1", Pool{Drives: 240, DriveBytes: 1e12, K: 4, M: 1}, []float64{2}, 60000, false, 0},
		{"120 drives declustered 8+3", Pool{Drives: 120, DriveBytes: 1e12, K: 8, M: 3}, []float64{6}, 60000, false, 0},
		{"one RAID-6 group, serial repair, correlated", Pool{Drives: 10, DriveBytes: 1e12, K: 8, M: 2, Layout: placement.Grouped, Preservation: -1}, []float64{24}, 60000, true, 5},
		{"60 drives declustered 8+2, serial repair, correlated", Pool{Drives: 60, DriveBytes: 1e12, K: 8, M: 2}, []float64{3, 2}, 60000, true, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Assess(ReliabilityInput{Pool: tc.pool, AFR: 0.03, RebuildHours: tc.hours, ExponentialRepair: true, Trials: tc.trials, Seed: 3,
				SerialRepair: tc.serial, CorrelationFactor: tc.corr})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("Markov %.4g h, Monte Carlo %.4g h [%.4g, %.4g]", r.MarkovMTTDLHours, r.MCMTTDLHours, r.MCMTTDLLow, r.MCMTTDLHigh)
			if m := r.MarkovMTTDLHours; m < 0.95*r.MCMTTDLLow || m > 1.05*r.MCMTTDLHigh {
				t.Errorf("Markov MTTDL %.4g h outside the Monte Carlo interval [%.4g, %.4g]", m, r.MCMTTDLLow, r.MCMTTDLHigh)
			}
			if r.MCMTTDLHigh/r.MCMTTDLLow > 1.4 {
				t.Errorf("interval [%.4g, %.4g] too wide to check anything", r.MCMTTDLLow, r.MCMTTDLHigh)
			}
		})
	}
}

// TestMarkovRAID6ClosedForm: for one RAID-6 group with rebuilds far
// shorter than the time between failures, the chain gives the textbook
// MTTDL ≈ μ1·μ2 / (n(n-1)(n-2)λ³) with μ2 = 2μ1 (both failed drives
// rebuilt at once, each in its own window).
func TestMarkovRAID6ClosedForm(t *testing.T) {
	const n, mttf, mttr = 10, 1e6, 12.0
	in := ReliabilityInput{Pool: Pool{Drives: n, DriveBytes: 1e12, K: 8, M: 2, Layout: placement.Grouped, Preservation: -1},
		AFR: HoursPerYear / mttf, RebuildHours: []float64{mttr}, Trials: 1000}
	r, err := Assess(in)
	if err != nil {
		t.Fatal(err)
	}
	lam, mu := 1/mttf, 1/mttr
	want := mu * 2 * mu / (n * (n - 1) * (n - 2) * lam * lam * lam)
	if math.Abs(r.MarkovMTTDLHours/want-1) > 0.01 {
		t.Errorf("MTTDL %.4g h, closed form %.4g h", r.MarkovMTTDLHours, want)
	}
}

// TestReliabilityEffects: wider pools and slower rebuilds lose data more
// often; correlated enclosure failures and unscrubbed latent errors add
// to the risk.
func TestReliabilityEffects(t *testing.T) {
	base := ReliabilityInput{Pool: Pool{Drives: 60, DriveBytes: 16e12, K: 8, M: 2, Layout: placement.Grouped, Servers: 10},
		FillBytes: 500e12, AFR: 0.02, RebuildHours: []float64{48}, Trials: 40000, Seed: 5}
	loss := func(in ReliabilityInput) float64 {
		t.Helper()
		r, err := Assess(in)
		if err != nil {
			t.Fatal(err)
		}
		return r.MCLossPerYear
	}
	b := loss(base)
	slow := base
	slow.RebuildHours = []float64{96}
	encl := base
	encl.EnclosureAFR, encl.EnclosureHours = 0.1, 8
	lse, scrubbed := base, base
	lse.LSEPerDriveYear = 0.013
	scrubbed.LSEPerDriveYear, scrubbed.ScrubDays = 0.013, 14
	for _, c := range []struct {
		name string
		got  float64
	}{{"slower rebuild", loss(slow)}, {"server failures", loss(encl)}, {"latent errors", loss(lse)}} {
		if !(c.got > 1.5*b) {
			t.Errorf("%s: loss/year %.3g, want well above %.3g", c.name, c.got, b)
		}
	}
	if s, u := loss(scrubbed), loss(lse); !(s < u) {
		t.Errorf("scrubbed every 14 days: loss/year %.3g, not below unscrubbed %.3g", s, u)
	}
}

func TestReliabilityRejectsBadInput(t *testing.T) {
	p := Pool{Drives: 60, DriveBytes: 1e12, K: 8, M: 2}
	for _, in := range []ReliabilityInput{
		{Pool: p, AFR: 0, RebuildHours: []float64{1}},
		{Pool: p, AFR: 0.02},
		{Pool: p, AFR: 0.02, RebuildHours: []float64{-1}},
		{Pool: p, AFR: 0.02, RebuildHours: []float64{1}, EnclosureAFR: 0.1, EnclosureHours: 1}, // no domains
		{Pool: p, AFR: 0.02, RebuildHours: []float64{1}, CorrelationFactor: -1},
		{Pool: Pool{Drives: 60, DriveBytes: 1e12, K: 8, M: 2, Layout: placement.Grouped, Servers: 10}, AFR: 0.02, RebuildHours: []float64{1},
			EnclosureAFR: 0.1, EnclosureHours: 1, CorrelationFactor: 10}, // the grouped Monte Carlo could not keep it per group
	} {
		if _, err := Assess(in); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: err %v, want ErrInvalid", in, err)
		}
	}
}
