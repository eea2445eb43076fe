package plan

import (
	"fmt"
	"math"
	"math/rand/v2"

	"poolfs/internal/placement"
)

// HoursPerYear is the year of the annual rates (365.25 days).
const HoursPerYear = 8766

// ReliabilityInput describes the failures a pool faces and how fast it
// recovers from them.
type ReliabilityInput struct {
	Pool Pool
	// FillBytes is the user data stored (it sets how much a critical
	// rebuild reads, and so its exposure to latent sector errors).
	FillBytes int64
	// AFR is each drive's annual failure rate (0.02 = 2% a year);
	// failures are independent and exponential.
	AFR float64
	// RebuildHours[j-1] is the rebuild window of the j-th concurrent
	// failure: how long after it the stripes it took to their worst
	// level are back one level up (critical first: for j > 1 in a
	// declustered pool, the critical stripes only). From SimulateRebuild
	// (RebuildResult.LevelSeconds); missing entries repeat the last.
	RebuildHours []float64
	// EnclosureAFR is the annual failure rate of each enclosure (the top
	// failure domain: Pool.Enclosures, or Pool.Servers without enclosures);
	// such a failure takes all its drives away for EnclosureHours, after
	// which they return with their data (not rebuilt). 0: none.
	EnclosureAFR   float64
	EnclosureHours float64
	// LSEPerDriveYear is how many latent sector errors a drive develops a
	// year; scrub finds them every ScrubDays (0: never scrubbed, so they
	// stay for the drive's life, ServiceYears, default 5). A latent error
	// read by a rebuild with no redundancy left loses that stripe.
	LSEPerDriveYear float64
	ScrubDays       float64
	ServiceYears    float64
	// Trials is the Monte Carlo excursions (0: 200,000); Seed seeds them.
	Trials int
	Seed   uint64
	// ExponentialRepair draws every rebuild window from an exponential
	// distribution of the given mean instead of using it as is: the
	// assumption of the Markov model, for checking the two against each
	// other.
	ExponentialRepair bool
	// SerialRepair rebuilds the failed drives of a unit one at a time, each
	// in RebuildHours[0] (the later entries are not used): the repair
	// model of the textbook MTTDL formulas (Chen et al. 1994, Elling 2007),
	// whose chain leaves i failed drives at rate 1/MTTR. Without it every
	// failed drive is rebuilt at once, in its own window.
	SerialRepair bool
	// CorrelationFactor makes failures correlated within a unit: with i of
	// its drives failed, each of the others fails CorrelationFactor^i times
	// as often (Chen et al. 1994, §3.4.5, take 10: "each successive disk
	// failure is 10 times more likely than the previous failure, until the
	// failed disk has been reconstructed"). 0 or 1: independent failures.
	CorrelationFactor float64
}

// Reliability is the data-loss outlook of a pool.
type Reliability struct {
	// MarkovMTTDLHours is the closed form (a birth-death Markov chain on
	// the number of failed drives, exponential repairs); NaN where it does
	// not apply (enclosure failures).
	MarkovMTTDLHours  float64
	MarkovLossPerYear float64
	// MonteCarlo estimates with 95% confidence intervals.
	MCMTTDLHours, MCMTTDLLow, MCMTTDLHigh float64
	MCLossPerYear, MCLossLow, MCLossHigh  float64
	// LSELossProb is the chance that a rebuild at the last level of
	// redundancy meets a latent sector error (and loses a stripe).
	LSELossProb float64
	// Coverage is the chance that M+1 failed drives share a stripe
	// (declustered: a PG holding all of them; grouped: 1 within a group).
	Coverage float64
	Trials   int
}

// Validate rejects an input Assess cannot model, with ErrInvalid. It needs
// no simulation: a caller can check its inputs before running the rebuild
// simulations that give RebuildHours.
func (in ReliabilityInput) Validate() error {
	p := in.Pool
	if err := p.Validate(); err != nil {
		return err
	}
	if !(in.AFR > 0 && in.AFR < 10) || len(in.RebuildHours) == 0 || in.EnclosureAFR < 0 || in.LSEPerDriveYear < 0 || in.ScrubDays < 0 {
		return fmt.Errorf("%w: AFR %g, %d rebuild windows, enclosure AFR %g, LSE %g, scrub %g days",
			ErrInvalid, in.AFR, len(in.RebuildHours), in.EnclosureAFR, in.LSEPerDriveYear, in.ScrubDays)
	}
	for _, h := range in.RebuildHours {
		if !(h > 0) {
			return fmt.Errorf("%w: rebuild window %g hours", ErrInvalid, h)
		}
	}
	if in.EnclosureAFR > 0 && (in.EnclosureHours <= 0 || (p.Servers == 0 && p.Enclosures == 0)) {
		return fmt.Errorf("%w: enclosure failures need --servers or --enclosures and a repair time", ErrInvalid)
	}
	if in.CorrelationFactor < 0 || math.IsInf(in.CorrelationFactor, 0) || math.IsNaN(in.CorrelationFactor) {
		return fmt.Errorf("%w: correlation factor %g", ErrInvalid, in.CorrelationFactor)
	}
	if in.correlation() != 1 && in.EnclosureAFR > 0 && p.Layout == placement.Grouped {
		// The Monte Carlo then runs all groups at once and could not keep
		// the correlation within a group.
		return fmt.Errorf("%w: correlated drive failures and enclosure failures together need the declustered layout", ErrInvalid)
	}
	return nil
}

// correlation is the factor by which each failed drive of a unit
// multiplies the failure rate of the others (1: independent).
func (in ReliabilityInput) correlation() float64 {
	if in.CorrelationFactor == 0 {
		return 1
	}
	return in.CorrelationFactor
}

// repairRate is the rate at which a unit with i failed drives gets one of
// them back: Σ_{j≤i} 1/T_j when all are rebuilt at once, 1/T_1 when one at
// a time.
func (in ReliabilityInput) repairRate(i int) float64 {
	if i > 0 && in.SerialRepair {
		return 1 / in.window(1)
	}
	rep := 0.0
	for j := 1; j <= i; j++ {
		rep += 1 / in.window(j)
	}
	return rep
}

// window is the rebuild window of the j-th concurrent failure (1-based).
func (in ReliabilityInput) window(j int) float64 {
	return in.RebuildHours[min(j, len(in.RebuildHours))-1]
}

// unit is the part of the pool a data loss is judged on: a group in the
// grouped layout (groups fail independently), the whole pool if
// declustered.
func (in ReliabilityInput) unit() (drives, units int) {
	p := in.Pool
	if p.Layout == placement.Grouped {
		w := p.K + p.M
		g := (p.Drives - p.preservation()) / w
		return w, g
	}
	return p.Drives, 1
}

// coverage is the chance that a given set of M+1 failed drives holds all
// the fragments of some stripe's M+1 slots: in a declustered pool, that
// one of its PGs (a random (K+M)-subset) contains all of them.
func coverage(p Pool) float64 {
	if p.Layout == placement.Grouped {
		return 1
	}
	w, n := float64(p.K+p.M), float64(p.Drives)
	pr := 1.0
	for i := 0.0; i <= float64(p.M); i++ {
		pr *= (w - i) / (n - i)
	}
	return -math.Expm1(float64(p.pgs()) * math.Log1p(-pr))
}

// lseLoss is the chance that the rebuild at the last level of redundancy
// (M drives failed) reads a latent sector error.
func lseLoss(in ReliabilityInput) float64 {
	p := in.Pool
	if in.LSEPerDriveYear <= 0 || in.FillBytes <= 0 {
		return 0
	}
	exposure := in.ServiceYears / 2 // a latent error waits for half a life on average
	if exposure <= 0 {
		exposure = 2.5
	}
	if in.ScrubDays > 0 {
		exposure = math.Min(exposure, in.ScrubDays/365.25/2)
	}
	present := in.LSEPerDriveYear * exposure // latent errors on a drive at a random time
	w := float64(p.K + p.M)
	stripes := float64(in.FillBytes) / float64(p.K) / float64(p.unit())
	var critical, drives float64
	if p.Layout == placement.Grouped {
		n, g := in.unit()
		critical, drives = stripes/float64(g), float64(n*g) // only group drives hold stripes
	} else {
		frac := 1.0 // stripes holding all M failed drives
		for i := 0.0; i < float64(p.M); i++ {
			frac *= (w - i) / (float64(p.Drives) - i)
		}
		critical, drives = stripes*frac, float64(p.Drives)
	}
	// Each critical stripe reads K fragments; a drive holds
	// stripes*w/drives fragments, and a latent error sits in one of them.
	perDrive := stripes * w / drives
	hits := present * critical * float64(p.K) / perDrive
	return -math.Expm1(-hits)
}

// Assess computes the Markov closed form and the Monte Carlo estimate.
func Assess(in ReliabilityInput) (Reliability, error) {
	if err := in.Validate(); err != nil {
		return Reliability{}, err
	}
	r := Reliability{Coverage: coverage(in.Pool), LSELossProb: lseLoss(in)}
	r.MarkovMTTDLHours = math.NaN()
	r.MarkovLossPerYear = math.NaN()
	if in.EnclosureAFR == 0 {
		r.MarkovMTTDLHours = markovMTTDL(in, r.Coverage, r.LSELossProb)
		r.MarkovLossPerYear = -math.Expm1(-HoursPerYear / r.MarkovMTTDLHours)
	}
	monteCarlo(in, &r)
	return r, nil
}

// markovMTTDL is the mean time to absorption from state 0 of the chain on
// i failed drives of one unit (i = 0..M): failures at (n-i)λc^i (c the
// correlation factor, 1 if failures are independent), repairs at
// repairRate(i) (every failed drive rebuilt in its own window, in
// parallel, or one at a time); from M-1 a failure is lost with the LSE
// probability q, from M with the coverage. The pool's MTTDL is the unit's
// over the units.
func markovMTTDL(in ReliabilityInput, c, q float64) float64 {
	n, units := in.unit()
	m := in.Pool.M
	lam := in.AFR / HoursPerYear
	// Unknowns E[0..m]: E[i] = 1/R_i + Σ_j P(i→j) E[j], loss absorbs with 0.
	a := make([][]float64, m+1)
	b := make([]float64, m+1)
	for i := 0; i <= m; i++ {
		a[i] = make([]float64, m+1)
		fail := float64(n-i) * lam * math.Pow(in.correlation(), float64(i))
		rep := in.repairRate(i)
		up, toLoss := fail, 0.0
		switch {
		case i == m:
			up, toLoss = 0, fail*c
		case i == m-1:
			up, toLoss = fail*(1-q), fail*q
		}
		out := up + toLoss + rep
		// out·E[i] - up·E[i+1] - rep·E[i-1] = 1 (self-loops of the
		// uncovered failures at m drop out).
		a[i][i] = out
		if i < m {
			a[i][i+1] -= up
		}
		if i > 0 {
			a[i][i-1] -= rep
		}
		b[i] = 1
	}
	e := solve(a, b)
	return e[0] / float64(units)
}

// solve solves a x = b by Gaussian elimination with partial pivoting.
func solve(a [][]float64, b []float64) []float64 {
	n := len(b)
	for col := range n {
		p := col
		for r := col + 1; r < n; r++ {
			if math.Abs(a[r][col]) > math.Abs(a[p][col]) {
				p = r
			}
		}
		a[col], a[p] = a[p], a[col]
		b[col], b[p] = b[p], b[col]
		for r := col + 1; r < n; r++ {
			f := a[r][col] / a[col][col]
			for k := col; k < n; k++ {
				a[r][k] -= f * a[col][k]
			}
			b[r] -= f * b[col]
		}
	}
	x := make([]float64, n)
	for i := n - 1; i >= 0; i-- {
		s := b[i]
		for k := i + 1; k < n; k++ {
			s -= a[i][k] * x[k]
		}
		x[i] = s / a[i][i]
	}
	return x
}

// rng returns the Monte Carlo generator of a seed.
func rng(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)) }
