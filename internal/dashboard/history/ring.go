package history

import (
	"math"
	"sort"
	"sync"
	"time"
)

// Tier is one resolution of a series.
type Tier struct {
	Res time.Duration // width of a slot
	Len int           // slots kept
}

// Tiers are the resolutions every series keeps, finest first: an hour of
// seconds, a day of minutes, 30 days of five minutes.
var Tiers = [3]Tier{{time.Second, 3600}, {time.Minute, 1440}, {5 * time.Minute, 8640}}

// ring is one tier of one series. vals[slot % len] holds slot's value for
// the Len slots up to last.
type ring struct {
	vals []float32
	last int64 // slot of the latest value; 0: none yet
	// sum and n accumulate the samples of slot last (the mean is stored).
	sum float64
	n   int
}

func newRing(n int) ring {
	r := ring{vals: make([]float32, n)}
	for i := range r.vals {
		r.vals[i] = float32(math.NaN())
	}
	return r
}

func (r *ring) add(slot int64, v float64) {
	n := int64(len(r.vals))
	switch {
	case slot < r.last:
		return
	case slot == r.last:
		r.sum += v
		r.n++
	default:
		for s := max(r.last+1, slot-n+1); s < slot; s++ {
			r.vals[s%n] = float32(math.NaN())
		}
		r.last, r.sum, r.n = slot, v, 1
	}
	r.vals[slot%n] = float32(r.sum / float64(r.n))
}

// at returns the value of slot (NaN if none or out of the ring).
func (r *ring) at(slot int64) float64 {
	n := int64(len(r.vals))
	if r.last == 0 || slot > r.last || slot <= r.last-n || slot < 0 {
		return math.NaN()
	}
	return float64(r.vals[slot%n])
}

type series struct{ tiers [len(Tiers)]ring }

func newSeries() *series {
	s := &series{}
	for i, t := range Tiers {
		s.tiers[i] = newRing(t.Len)
	}
	return s
}

// Store holds named series. It is safe for concurrent use.
type Store struct {
	mu struct {
		sync.Mutex
		series map[string]*series
	}
}

// NewStore returns an empty store.
func NewStore() *Store {
	s := &Store{}
	s.mu.series = map[string]*series{}
	return s
}

// Add records the value v of series name at time t in every tier.
func (s *Store) Add(name string, t time.Time, v float64) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sr := s.mu.series[name]
	if sr == nil {
		sr = newSeries()
		s.mu.series[name] = sr
	}
	for i, tr := range Tiers {
		sr.tiers[i].add(t.UnixNano()/int64(tr.Res), v)
	}
}

// Point is one slot of a series: its start time and value (NaN: no data).
type Point struct {
	T time.Time
	V float64
}

// Query returns the slots of tier of series name that start in
// [from, to], oldest first; a series that does not exist has only NaN
// points. tier indexes Tiers.
func (s *Store) Query(name string, tier int, from, to time.Time) []Point {
	res := int64(Tiers[tier].Res)
	a, b := from.UnixNano()/res, to.UnixNano()/res
	if b-a+1 > int64(Tiers[tier].Len) {
		a = b - int64(Tiers[tier].Len) + 1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sr := s.mu.series[name]
	out := make([]Point, 0, max(0, b-a+1))
	for slot := a; slot <= b; slot++ {
		v := math.NaN()
		if sr != nil {
			v = sr.tiers[tier].at(slot)
		}
		out = append(out, Point{T: time.Unix(0, slot*res), V: v})
	}
	return out
}

// Names returns the names of the series, sorted.
func (s *Store) Names() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.mu.series))
	for n := range s.mu.series {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Rate turns cumulative counters into per-second rates.
type Rate struct {
	mu   sync.Mutex
	prev map[string]counter
}

type counter struct {
	t time.Time
	v int64
}

// Observe records counter name's value v at t and returns its rate per
// second since the previous observation. ok is false for the first
// observation, when time did not advance, and when the counter went
// backwards (it restarted from 0).
func (r *Rate) Observe(name string, t time.Time, v int64) (rate float64, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.prev == nil {
		r.prev = map[string]counter{}
	}
	p, seen := r.prev[name]
	r.prev[name] = counter{t, v}
	dt := t.Sub(p.t).Seconds()
	if !seen || dt <= 0 || v < p.v {
		return 0, false
	}
	return float64(v-p.v) / dt, true
}

// Prune forgets the counters last observed before t (drives replaced,
// clients gone), so that the table does not grow with them.
func (r *Rate) Prune(t time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, c := range r.prev {
		if c.t.Before(t) {
			delete(r.prev, k)
		}
	}
}
