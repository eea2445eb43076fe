package stripeio

import (
	"slices"
	"sync"
	"time"

	"poolfs/internal/placement"
)

// Tuning of the latency estimates.
const (
	// latencyMinSamples: a drive's estimate counts among the peers once it
	// has this many samples.
	latencyMinSamples = 2
	// latencyMinPeers: below this many drives with estimates the bound is
	// latencyColdBound, so that a cold client does not hedge every read.
	latencyMinPeers  = 3
	latencyColdBound = 100 * time.Millisecond
	// slowRetry: a drive the reader avoids because it is slow is still
	// sent one probe read this often (Probe), so that its estimate follows
	// it when it recovers.
	slowRetry = time.Second
	// hedgeShare and hedgeBurst: hedged reads are at most one per
	// hedgeShare reads observed, with hedgeBurst at hand at first (the
	// budget never holds more), so that a client whose reads are all
	// slow together (links or drives busy, where each hedge is a
	// fragment more of the load) fetches at most that share more than it
	// needs, while a drive that turns slow or stops answering gets its
	// first late reads hedged at once, and Avoid leaves it out from then on.
	hedgeShare = 64
	hedgeBurst = 16
)

// Latencies estimates how long each drive takes to return a fragment to
// one reader (a client), so that its Fetches can tell a late read from a
// normal one (it is their Hedger) and its read plans can leave slow drives
// to the last (Order). Per drive it keeps a smoothed latency and its mean deviation
// (exponentially weighted, as TCP estimates round trips, after a plain
// mean of the first samples, so that a new reader judges a drive from its
// second sample on); a drive's "high"
// latency, about its 95th percentile, is smoothed + 2 × deviation. With the
// medians over drives (so that one slow drive does not raise the figures it
// is judged by):
//
//	hedging bound = max(floor, factor × median high latency)
//	slow          = own smoothed and latest latency > max(floor, factor × median smoothed latency)
//
// A fetch still running after the bound is late (see Fetch.Get); a slow
// drive is not read for a stripe while parity can stand in for it, but is
// sent a probe read beside the stripe's once per slowRetry (Probe), which
// no read waits for, to see whether it recovered. Hedged reads are budgeted: at
// most one per hedgeShare reads observed, hedgeBurst at most at once
// (Hedge). It is safe for concurrent use.
type Latencies struct {
	floor  time.Duration
	factor float64
	mu     struct {
		sync.Mutex
		hedges float64 // hedged reads the budget allows now
		drives map[placement.DriveID]*driveLatency
		bound  time.Duration // cached; recomputed every boundEvery samples
		slow   time.Duration // likewise: a smoothed latency above it is slow
		since  int           // samples since they were computed
	}
}

// driveLatency is one drive's estimate, guarded by Latencies.mu.
type driveLatency struct {
	srtt, dev time.Duration
	last      time.Duration // the latest sample
	n         int
	seen      time.Time // last sample or probe read started (Probe)
}

const boundEvery = 16

// NewLatencies returns an estimator with no samples whose bounds are at
// least floor and factor times the median drive's.
func NewLatencies(floor time.Duration, factor float64) *Latencies {
	l := &Latencies{floor: floor, factor: factor}
	l.mu.drives = map[placement.DriveID]*driveLatency{}
	l.mu.since = boundEvery // compute on first use
	l.mu.hedges = hedgeBurst
	return l
}

// Hedge reports whether the budget allows a hedged read now, and takes it
// from the budget if so. Every read observed adds 1/hedgeShare of one, up
// to hedgeBurst.
func (l *Latencies) Hedge() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.hedges < 1 {
		return false
	}
	l.mu.hedges--
	return true
}

// Observe records that a fragment read of drive id took d (or was given up
// after d: such a censored sample still says the drive is at least that
// slow).
func (l *Latencies) Observe(id placement.DriveID, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.mu.drives[id]
	if e == nil {
		e = &driveLatency{}
		l.mu.drives[id] = e
	}
	e.n++
	e.last, e.seen = d, time.Now()
	if e.n == 1 {
		e.srtt, e.dev = d, d/2
	} else {
		diff := d - e.srtt
		if diff < 0 {
			diff = -diff
		}
		// The first samples are averaged, then weighted as TCP does.
		e.dev += (diff - e.dev) / time.Duration(min(e.n, 4))
		e.srtt += (d - e.srtt) / time.Duration(min(e.n, 8))
	}
	l.mu.since++
	l.mu.hedges = min(hedgeBurst, l.mu.hedges+1.0/hedgeShare)
}

// Bound returns the time after which a read of drive id is late: the
// hedging bound, or, for a drive with an estimate that is not slow,
// factor × its own high latency if that is longer. A drive's reads that
// queue behind others (its server's link is busy) take longer than the
// median drive's without being late, while a drive that turns slow is
// judged by its own past until it is slow, and then, until Avoid leaves it
// out, by the bound.
func (l *Latencies) Bound(id placement.DriveID) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.boundLocked()
	if e := l.mu.drives[id]; e != nil && e.n >= latencyMinSamples && e.srtt <= l.mu.slow {
		b = max(b, time.Duration(l.factor*float64(e.srtt+2*e.dev)))
	}
	return b
}

func (l *Latencies) boundLocked() time.Duration {
	if l.mu.since < boundEvery {
		return l.mu.bound
	}
	l.mu.since = 0
	var highs, typical []time.Duration
	for _, e := range l.mu.drives {
		if e.n >= latencyMinSamples {
			highs = append(highs, e.srtt+2*e.dev)
			typical = append(typical, e.srtt)
		}
	}
	if len(highs) < latencyMinPeers {
		l.mu.bound = max(l.floor, latencyColdBound)
		l.mu.slow = l.mu.bound
		return l.mu.bound
	}
	slices.Sort(highs)
	slices.Sort(typical)
	l.mu.bound = max(l.floor, time.Duration(l.factor*float64(highs[len(highs)/2])))
	l.mu.slow = max(l.floor, time.Duration(l.factor*float64(typical[len(typical)/2])))
	return l.mu.bound
}

// Avoid reports whether a read of drive id should be replaced by parity
// from the start: the drive is slow (see Latencies).
func (l *Latencies) Avoid(id placement.DriveID) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.slowLocked(l.mu.drives[id])
}

func (l *Latencies) slowLocked(e *driveLatency) bool {
	l.boundLocked()
	return e != nil && e.n >= latencyMinSamples && e.srtt > l.mu.slow && e.last > l.mu.slow
}

// Probe reports whether drive id, which Avoid leaves out, is due a probe
// read (Fetch.Probes), and counts it if so: when slowRetry has passed
// since its last sample or probe, so that its estimate follows it when it
// recovers. A probe is read beside the parity that stands in for the
// drive and never waited for: a slow drive's read among those a stripe
// needs would hold the stripe for as long as the drive takes, since a
// read is late only after twice the median drive's high latency, about
// what a drive slowed by a few times the typical read takes anyway.
func (l *Latencies) Probe(id placement.DriveID, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.mu.drives[id]
	if !l.slowLocked(e) || now.Sub(e.seen) < slowRetry {
		return false
	}
	e.seen = now
	return true
}
