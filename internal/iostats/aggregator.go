package iostats

import (
	"fmt"
	"sort"
	"time"
)

// Config sets an Aggregator's windows and limits. Zero fields take the
// defaults.
type Config struct {
	// Window is the span rates and percentiles are computed over (default
	// 10 s): at least two of the clients' report intervals.
	Window time.Duration
	// Slots is the number of time slots the window is kept in (default
	// 5): figures leave the window one slot at a time.
	Slots int
	// Retain is how long an idle client or job is kept with its totals
	// (default 10 minutes).
	Retain time.Duration
	// MaxEntries caps the clients and the jobs kept, each (default
	// 10000); past it the longest idle entry is dropped.
	MaxEntries int
}

func (c *Config) setDefaults() {
	if c.Window == 0 {
		c.Window = 10 * time.Second
	}
	if c.Slots == 0 {
		c.Slots = 5
	}
	if c.Retain == 0 {
		c.Retain = 10 * time.Minute
	}
	if c.MaxEntries == 0 {
		c.MaxEntries = 10000
	}
}

// Validate rejects negative values and a window shorter than its slots.
func (c Config) Validate() error {
	if c.Window < 0 || c.Slots < 0 || c.Retain < 0 || c.MaxEntries < 0 {
		return fmt.Errorf("iostats: negative setting in %+v", c)
	}
	if c.Slots > 0 && c.Window > 0 && c.Window/time.Duration(c.Slots) < time.Millisecond {
		return fmt.Errorf("iostats: window %v in %d slots: slots under 1ms", c.Window, c.Slots)
	}
	return nil
}

// slot holds what arrived in one slot of time.
type slot struct {
	n int64 // slot number: start time / slot length
	s Stats
}

// entry is one client or job.
type entry struct {
	name  string
	first time.Time
	last  time.Time
	total Stats
	slots []slot // ring; nil while idle
	host  string // clients
	mount string
	boot  uint64 // clients: the last counted report's Boot and Seq
	seq   uint64
}

// Aggregator keeps the recent figures of every client and job. It is not
// safe for concurrent use (mgmt guards it with a mutex).
type Aggregator struct {
	cfg     Config
	slotLen time.Duration
	clients map[string]*entry
	jobs    map[string]*entry
	// jobClients: the last slot each (job, client) pair was seen in.
	jobClients map[[2]string]int64
}

// NewAggregator returns an empty aggregator.
func NewAggregator(cfg Config) (*Aggregator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	return &Aggregator{cfg: cfg, slotLen: cfg.Window / time.Duration(cfg.Slots),
		clients: map[string]*entry{}, jobs: map[string]*entry{}, jobClients: map[[2]string]int64{}}, nil
}

// Add counts a report received at now. It returns false, counting
// nothing, for a report sent again that was counted already (the same
// Boot and a Seq not above the last counted one of the client).
func (a *Aggregator) Add(now time.Time, r *Report) bool {
	n := now.UnixNano() / int64(a.slotLen)
	name := r.Client()
	if c := a.clients[name]; c != nil && r.Boot != 0 && c.boot == r.Boot && r.Seq <= c.seq {
		c.last = now
		return false
	}
	c := a.entry(a.clients, name, now)
	c.host, c.mount = r.Host, r.Mount
	c.boot, c.seq = r.Boot, r.Seq
	for i := range r.Jobs {
		j := &r.Jobs[i]
		c.add(n, a.cfg.Slots, &j.Stats)
		je := a.entry(a.jobs, j.Job, now)
		je.add(n, a.cfg.Slots, &j.Stats)
		a.jobClients[[2]string{j.Job, name}] = n
	}
	a.expire(now)
	return true
}

func (a *Aggregator) entry(m map[string]*entry, name string, now time.Time) *entry {
	e := m[name]
	if e == nil {
		if len(m) >= a.cfg.MaxEntries {
			a.dropOldest(m)
		}
		e = &entry{name: name, first: now}
		m[name] = e
	}
	e.last = now
	return e
}

func (e *entry) add(n int64, slots int, s *Stats) {
	e.total.Add(s)
	if e.slots == nil {
		e.slots = make([]slot, slots)
	}
	sl := &e.slots[int(n%int64(slots))]
	if sl.n != n {
		*sl = slot{n: n}
	}
	sl.s.Add(s)
}

func (a *Aggregator) dropOldest(m map[string]*entry) {
	var old *entry
	for _, e := range m {
		if old == nil || e.last.Before(old.last) {
			old = e
		}
	}
	if old != nil {
		delete(m, old.name)
	}
}

// expire drops entries idle past Retain and frees the slots of those idle
// past the window.
func (a *Aggregator) expire(now time.Time) {
	for _, m := range []map[string]*entry{a.clients, a.jobs} {
		for name, e := range m {
			idle := now.Sub(e.last)
			switch {
			case idle > a.cfg.Retain:
				delete(m, name)
			case idle > a.cfg.Window+a.slotLen:
				e.slots = nil
			}
		}
	}
	oldest := now.UnixNano()/int64(a.slotLen) - int64(a.cfg.Slots)
	for k, n := range a.jobClients {
		if n <= oldest {
			delete(a.jobClients, k)
		}
	}
}

// recent sums the slots inside the window that ends at slot n.
func (e *entry) recent(n int64, slots int) Stats {
	var s Stats
	for i := range e.slots {
		if sl := &e.slots[i]; sl.n > n-int64(slots) && sl.n <= n {
			s.Add(&sl.s)
		}
	}
	return s
}

// Row is one client or job in a Snapshot: rates and latency percentiles
// over the snapshot's window, and totals since it was first seen.
type Row struct {
	// Name is the job (its variable's value; "" for callers without one)
	// or the client (host:mount).
	Name  string `json:"name"`
	Host  string `json:"host,omitempty"`  // clients
	Mount string `json:"mount,omitempty"` // clients
	// Clients is the number of clients that reported the job in the window.
	Clients int `json:"clients,omitempty"`

	ReadOpsPerSec    float64 `json:"read_ops_per_sec"`
	WriteOpsPerSec   float64 `json:"write_ops_per_sec"`
	MetaOpsPerSec    float64 `json:"meta_ops_per_sec"`
	ReadBytesPerSec  float64 `json:"read_bytes_per_sec"`
	WriteBytesPerSec float64 `json:"write_bytes_per_sec"`
	// Latency percentiles of the window's operations in seconds, all
	// classes together and per data class (0: no operation).
	P50      float64 `json:"p50_sec"`
	P99      float64 `json:"p99_sec"`
	ReadP50  float64 `json:"read_p50_sec"`
	ReadP99  float64 `json:"read_p99_sec"`
	WriteP50 float64 `json:"write_p50_sec"`
	WriteP99 float64 `json:"write_p99_sec"`

	ReadOps    uint64 `json:"read_ops"`
	WriteOps   uint64 `json:"write_ops"`
	MetaOps    uint64 `json:"meta_ops"`
	ReadBytes  uint64 `json:"read_bytes"`
	WriteBytes uint64 `json:"write_bytes"`
	FirstSeen  int64  `json:"first_seen"` // unix ns
	LastSeen   int64  `json:"last_seen"`  // unix ns
}

// OpsPerSec is the rate of operations of every class.
func (r *Row) OpsPerSec() float64 { return r.ReadOpsPerSec + r.WriteOpsPerSec + r.MetaOpsPerSec }

// BytesPerSec is the rate of bytes read and written.
func (r *Row) BytesPerSec() float64 { return r.ReadBytesPerSec + r.WriteBytesPerSec }

// Snapshot is the state of an Aggregator at one time: every client and the
// busiest jobs, busiest first (bytes per second, then operations per
// second, then name).
type Snapshot struct {
	At        int64   `json:"at"`         // unix ns
	WindowSec float64 `json:"window_sec"` // the span of the rates
	Clients   []Row   `json:"clients"`
	Jobs      []Row   `json:"jobs"`
	// JobsTotal is the number of jobs known; Jobs holds at most the top
	// asked for.
	JobsTotal int `json:"jobs_total"`
}

// Snapshot returns the figures at now: all clients, and the topJobs
// busiest jobs (all if topJobs ≤ 0). Rates are over the window, or over
// the time since an entry was first seen if that is shorter (at least one
// slot).
func (a *Aggregator) Snapshot(now time.Time, topJobs int) Snapshot {
	a.expire(now)
	n := now.UnixNano() / int64(a.slotLen)
	snap := Snapshot{At: now.UnixNano(), WindowSec: a.cfg.Window.Seconds(), JobsTotal: len(a.jobs)}
	clients := map[string]int{}
	for k := range a.jobClients {
		clients[k[0]]++
	}
	for _, e := range a.clients {
		r := a.row(e, n, now)
		r.Host, r.Mount = e.host, e.mount
		snap.Clients = append(snap.Clients, r)
	}
	for _, e := range a.jobs {
		r := a.row(e, n, now)
		r.Clients = clients[e.name]
		snap.Jobs = append(snap.Jobs, r)
	}
	sortRows(snap.Clients)
	sortRows(snap.Jobs)
	if topJobs > 0 && len(snap.Jobs) > topJobs {
		snap.Jobs = snap.Jobs[:topJobs]
	}
	return snap
}

func (a *Aggregator) row(e *entry, n int64, now time.Time) Row {
	s := e.recent(n, a.cfg.Slots)
	span := min(a.cfg.Window, max(now.Sub(e.first), a.slotLen)).Seconds()
	var all Histogram
	for i := range s {
		all.Add(&s[i].Lat)
	}
	return Row{Name: e.name,
		ReadOpsPerSec: float64(s[Read].Ops) / span, WriteOpsPerSec: float64(s[Write].Ops) / span,
		MetaOpsPerSec: float64(s[Meta].Ops) / span, ReadBytesPerSec: float64(s[Read].Bytes) / span,
		WriteBytesPerSec: float64(s[Write].Bytes) / span,
		P50:              all.Quantile(0.5).Seconds(), P99: all.Quantile(0.99).Seconds(),
		ReadP50: s[Read].Lat.Quantile(0.5).Seconds(), ReadP99: s[Read].Lat.Quantile(0.99).Seconds(),
		WriteP50: s[Write].Lat.Quantile(0.5).Seconds(), WriteP99: s[Write].Lat.Quantile(0.99).Seconds(),
		ReadOps: e.total[Read].Ops, WriteOps: e.total[Write].Ops, MetaOps: e.total[Meta].Ops,
		ReadBytes: e.total[Read].Bytes, WriteBytes: e.total[Write].Bytes,
		FirstSeen: e.first.UnixNano(), LastSeen: e.last.UnixNano(),
	}
}

func sortRows(rows []Row) {
	sort.Slice(rows, func(i, j int) bool {
		a, b := &rows[i], &rows[j]
		if x, y := a.BytesPerSec(), b.BytesPerSec(); x != y {
			return x > y
		}
		if x, y := a.OpsPerSec(), b.OpsPerSec(); x != y {
			return x > y
		}
		return a.Name < b.Name
	})
}
