package plan

import (
	"math"
	"math/rand/v2"

	"poolfs/internal/placement"
)

// The Monte Carlo estimate. Data loss is rare (one excursion in millions),
// so it is estimated per regenerative cycle with failure biasing (Goyal,
// Shahabuddin et al., "balanced failure biasing"): a cycle is the time
// from one all-healthy state to the next, an excursion its part with some
// drive away. In an excursion, the next failure is made at least as likely
// as the next repair and each path carries its likelihood ratio, so that
// the loss probability per cycle P is estimated with few trials and no
// bias; MTTDL = E[cycle] / P (the regenerative ratio).

// mcState is one excursion.
type mcState struct {
	in        *ReliabilityInput
	now       float64
	weight    float64
	failed    []mcAway // failed drives and down enclosures, by deadline order of insertion
	down      map[int]bool
	lost      map[int]bool // failed drives
	domains   int          // top-level domains
	domOf     func(drive int) int
	group     func(drive int) int // grouped: group of a drive, -1 for spares and unused
	limit     bool                // declustered: at most M fragments of a stripe per top-level domain
	c         float64             // coverage of M+1 failed drives
	domSize   []int               // drives per top-level domain
	domDrives []map[int]int       // per domain: drives per group (grouped) or the domain itself
	q         float64             // LSE loss on reaching M
}

type mcAway struct {
	until     float64
	drive     int // -1: an enclosure
	enclosure int
}

func newMC(in *ReliabilityInput, r *Reliability) *mcState {
	p := in.Pool
	s := &mcState{in: in, c: r.Coverage, q: r.LSELossProb}
	switch {
	case p.Enclosures > 0:
		s.domains = p.Enclosures
		s.domOf = func(d int) int { return (d % p.Servers) % p.Enclosures }
	case p.Servers > 0:
		s.domains = p.Servers
		s.domOf = func(d int) int { return d % p.Servers }
	}
	if p.Layout == placement.Grouped {
		w := p.K + p.M
		_, g := in.unit()
		s.group = func(d int) int {
			if d/w < g {
				return d / w
			}
			return -1
		}
	} else if s.domains > 0 {
		if pl, err := p.placementPool(nil).Placer(); err == nil {
			lv := pl.EnforcedLevels()
			s.limit = len(lv) > 0 && lv[0] == 0
		}
	}
	s.domSize = make([]int, s.domains)
	s.domDrives = make([]map[int]int, s.domains)
	for dom := range s.domains {
		s.domDrives[dom] = map[int]int{}
	}
	for d := range p.Drives {
		if s.domOf == nil {
			break
		}
		dom := s.domOf(d)
		s.domSize[dom]++
		if s.group != nil {
			s.domDrives[dom][s.group(d)]++
		} else {
			s.domDrives[dom][dom]++
		}
	}
	return s
}

// unavailable reports whether drive d is away (failed or in a down
// enclosure).
func (s *mcState) unavailable(d int) bool {
	return s.lost[d] || (s.domOf != nil && s.down[s.domOf(d)])
}

// awayCounts returns the drives away per group (grouped) or per top-level
// domain (declustered; key 0 without domains). Only the few failed drives
// and down enclosures are visited.
func (s *mcState) awayCounts() map[int]int {
	out := map[int]int{}
	key := func(d int) int {
		switch {
		case s.group != nil:
			return s.group(d)
		case s.domOf != nil:
			return s.domOf(d)
		}
		return 0
	}
	for d := range s.lost {
		if s.domOf == nil || !s.down[s.domOf(d)] {
			out[key(d)]++
		}
	}
	for dom := range s.down {
		for k, n := range s.domDrives[dom] {
			out[k] += n
		}
	}
	delete(out, -1) // spares and unused drives hold no stripes
	return out
}

// lossProb is the chance that the drives away now lose a stripe: grouped,
// a group with more than M away; declustered, more than M away (each
// top-level domain counting at most M when placement keeps that limit)
// and a PG holding M+1 of them. It also returns the worst level.
func (s *mcState) lossProb() (float64, int) {
	p := s.in.Pool
	counts := s.awayCounts()
	if s.group != nil {
		worst := 0
		for _, c := range counts {
			worst = max(worst, c)
		}
		if worst > p.M {
			return 1, worst
		}
		return 0, worst
	}
	f := 0
	for _, c := range counts {
		if s.limit {
			c = min(c, p.M)
		}
		f += c
	}
	if f <= p.M {
		return 0, f
	}
	// Chance that some PG holds M+1 of the f: about C(f, M+1) sets.
	sets := 1.0
	for i := 0; i <= p.M; i++ {
		sets *= float64(f-i) / float64(i+1)
	}
	return -math.Expm1(sets * math.Log1p(-s.c)), f
}

// upDrives is the number of drives not away.
func (s *mcState) upDrives() int {
	n := s.in.Pool.Drives
	for d := range s.lost {
		if s.domOf == nil || !s.down[s.domOf(d)] {
			n--
		}
	}
	for dom := range s.down {
		n -= s.domSize[dom]
	}
	return n
}

// rates are the failure rates now: drives up (each failed drive of the
// unit multiplying their rate by the correlation factor) and enclosures up.
func (s *mcState) rates() (drive, encl float64) {
	drive = float64(s.upDrives()) * s.in.AFR / HoursPerYear * math.Pow(s.in.correlation(), float64(len(s.lost)))
	if s.in.EnclosureAFR > 0 {
		encl = float64(s.domains-len(s.down)) * s.in.EnclosureAFR / HoursPerYear
	}
	return drive, encl
}

func (s *mcState) duration(mean float64, u float64) float64 {
	if s.in.ExponentialRepair {
		return -mean * math.Log(1-u)
	}
	return mean
}

// biasTo is the least probability given to "the next event is a failure"
// in an excursion.
const biasTo = 0.5

// excursion runs one excursion from the first failure after an
// all-healthy state; it returns the likelihood-weighted loss and duration.
func (s *mcState) excursion(r *randSource, firstEnclosure bool) (loss, dur float64) {
	s.now, s.weight = 0, 1
	s.failed = s.failed[:0]
	s.lost, s.down = map[int]bool{}, map[int]bool{}
	loss = s.fail(r, firstEnclosure)
	for len(s.failed) > 0 && s.weight > 1e-300 {
		// The next deadline.
		next := 0
		for i, a := range s.failed {
			if a.until < s.failed[next].until {
				next = i
			}
		}
		gap := s.failed[next].until - s.now
		fd, fe := s.rates()
		f := fd + fe
		p := -math.Expm1(-f * math.Max(gap, 0))
		pb := math.Max(p, biasTo)
		if f == 0 {
			pb = 0
		}
		if r.Float64() < pb {
			s.weight *= p / pb
			// A failure before the deadline: its time from the truncated exponential.
			t := -math.Log1p(-r.Float64()*p) / f
			s.now += t
			loss += s.fail(r, r.Float64()*f < fe)
			continue
		}
		if pb > 0 {
			s.weight *= (1 - p) / (1 - pb)
		}
		s.now = s.failed[next].until
		a := s.failed[next]
		s.failed = append(s.failed[:next], s.failed[next+1:]...)
		if a.drive >= 0 {
			delete(s.lost, a.drive)
		} else {
			delete(s.down, a.enclosure)
		}
	}
	return loss, s.weight * s.now
}

// fail applies one failure (a drive or an enclosure) and returns the
// weighted loss it causes; the excursion continues with the weight of the
// paths that survived it, or ends if none did.
func (s *mcState) fail(r *randSource, enclosure bool) float64 {
	p := s.in.Pool
	_, before := s.lossProb()
	if enclosure {
		var up []int
		for dom := range s.domains {
			if !s.down[dom] {
				up = append(up, dom)
			}
		}
		if len(up) == 0 {
			return 0
		}
		dom := up[r.IntN(len(up))]
		s.down[dom] = true
		s.failed = append(s.failed, mcAway{until: s.now + s.duration(s.in.EnclosureHours, r.Float64()), drive: -1, enclosure: dom})
	} else {
		d := r.IntN(p.Drives)
		for s.unavailable(d) {
			d = r.IntN(p.Drives)
		}
		s.lost[d] = true
		start, window := s.now, s.in.window(len(s.lost))
		if s.in.SerialRepair {
			// Its rebuild starts when the rebuilds before it end.
			window = s.in.window(1)
			for _, a := range s.failed {
				if a.drive >= 0 {
					start = math.Max(start, a.until)
				}
			}
		}
		s.failed = append(s.failed, mcAway{until: start + s.duration(window, r.Float64()), drive: d})
	}
	lp, after := s.lossProb()
	if after >= p.M && before < p.M && s.q > 0 {
		lp = 1 - (1-lp)*(1-s.q) // the rebuild at no redundancy meets a latent error
	}
	loss := s.weight * lp
	s.weight *= 1 - lp
	if lp >= 1 {
		s.failed = s.failed[:0]
	}
	return loss
}

// monteCarlo fills r's Monte Carlo estimates. The groups of a grouped pool
// fail independently unless enclosures couple them, so then one group is
// simulated and its MTTDL divided by the groups (a second failure in
// another group would otherwise waste most excursions).
func monteCarlo(in ReliabilityInput, r *Reliability) {
	trials := in.Trials
	if trials <= 0 {
		trials = 200000
	}
	units := 1.0
	if in.Pool.Layout == placement.Grouped && in.EnclosureAFR == 0 {
		n, g := in.unit()
		in.Pool.Drives, in.Pool.Preservation, in.Pool.Servers, in.Pool.Enclosures = n, -1, 0, 0
		units = float64(g)
	}
	s := newMC(&in, r)
	src := &randSource{rng(in.Seed + 1)}
	fd, fe := s.rates()
	start := fd + fe // the rate of leaving the all-healthy state
	var sum, sum2, durs float64
	for range trials {
		l, d := s.excursion(src, src.Float64()*start < fe)
		sum += l
		sum2 += l * l
		durs += d
	}
	n := float64(trials)
	mean := sum / n
	sd := math.Sqrt(math.Max(0, sum2/n-mean*mean))
	half := 1.96 * sd / math.Sqrt(n)
	cycle := 1/start + durs/n // of one unit
	r.Trials = trials
	r.MCMTTDLHours = cycle / mean / units
	r.MCMTTDLLow = cycle / (mean + half) / units
	r.MCMTTDLHigh = math.Inf(1)
	if mean > half {
		r.MCMTTDLHigh = cycle / (mean - half) / units
	}
	perYear := func(h float64) float64 { return -math.Expm1(-HoursPerYear / h) }
	r.MCLossPerYear, r.MCLossLow, r.MCLossHigh = perYear(r.MCMTTDLHours), perYear(r.MCMTTDLHigh), perYear(r.MCMTTDLLow)
}

// randSource is the generator of one Monte Carlo run.
type randSource struct{ *rand.Rand }
