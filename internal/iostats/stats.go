package iostats

import (
	"encoding/json"
	"fmt"
	"sync"
	"time"
)

// Class is the kind of an operation.
type Class uint8

// The classes of operations. Meta is every operation that moves no file
// data: lookups, attributes, creates, removes, renames, directory reads,
// opens, closes, syncs.
const (
	Read Class = iota
	Write
	Meta
	NumClasses
)

var classNames = [NumClasses]string{"read", "write", "meta"}

// String returns "read", "write" or "meta".
func (c Class) String() string {
	if c < NumClasses {
		return classNames[c]
	}
	return fmt.Sprintf("class(%d)", c)
}

// Counters are the operations of one class: how many, their bytes (0 for
// Meta) and their latencies.
type Counters struct {
	Ops   uint64
	Bytes uint64
	Lat   Histogram
}

// Add adds o to c.
func (c *Counters) Add(o *Counters) {
	c.Ops += o.Ops
	c.Bytes += o.Bytes
	c.Lat.Add(&o.Lat)
}

// wireCounters is Counters on the wire: the histogram as [bucket, count]
// pairs of its non-empty buckets.
type wireCounters struct {
	Ops   uint64      `json:"ops"`
	Bytes uint64      `json:"bytes,omitempty"`
	Lat   [][2]uint64 `json:"lat,omitempty"`
}

// MarshalJSON writes the wire form.
func (c Counters) MarshalJSON() ([]byte, error) {
	w := wireCounters{Ops: c.Ops, Bytes: c.Bytes}
	for i, n := range c.Lat {
		if n != 0 {
			w.Lat = append(w.Lat, [2]uint64{uint64(i), n})
		}
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads the wire form. It rejects a bucket index out of
// range, a bucket given twice, and latency counts that do not add up to
// Ops.
func (c *Counters) UnmarshalJSON(b []byte) error {
	var w wireCounters
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*c = Counters{Ops: w.Ops, Bytes: w.Bytes}
	var sum uint64
	for _, p := range w.Lat {
		if p[0] >= NumBuckets {
			return fmt.Errorf("%w: latency bucket %d out of range (%d buckets)", ErrBadReport, p[0], NumBuckets)
		}
		if c.Lat[p[0]] != 0 {
			return fmt.Errorf("%w: latency bucket %d given twice", ErrBadReport, p[0])
		}
		if p[1] == 0 || sum+p[1] < sum {
			return fmt.Errorf("%w: latency bucket %d count %d", ErrBadReport, p[0], p[1])
		}
		c.Lat[p[0]] = p[1]
		sum += p[1]
	}
	if sum != c.Ops {
		return fmt.Errorf("%w: %d latencies for %d operations", ErrBadReport, sum, c.Ops)
	}
	return nil
}

// Stats are the counters of every class.
type Stats [NumClasses]Counters

// Add adds o to s.
func (s *Stats) Add(o *Stats) {
	for i := range s {
		s[i].Add(&o[i])
	}
}

// Ops returns the operations of every class.
func (s *Stats) Ops() uint64 { return s[Read].Ops + s[Write].Ops + s[Meta].Ops }

// Record counts one operation of class c that moved n bytes in d.
func (s *Stats) Record(c Class, n int, d time.Duration) {
	k := &s[c]
	k.Ops++
	k.Bytes += uint64(max(n, 0))
	k.Lat.Observe(d)
}

// Recorder counts a client's operations per job. It is safe for
// concurrent use; the zero value is not: use NewRecorder.
type Recorder struct {
	mu struct {
		sync.Mutex
		total   Stats             // since the recorder was made
		pending map[string]*Stats // per job, since the last Take
	}
}

// NewRecorder returns an empty recorder.
func NewRecorder() *Recorder {
	r := &Recorder{}
	r.mu.pending = map[string]*Stats{}
	return r
}

// Record counts one operation of job: class c, n bytes, latency d.
func (r *Recorder) Record(job string, c Class, n int, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.mu.pending[job]
	if s == nil {
		s = new(Stats)
		r.mu.pending[job] = s
	}
	s.Record(c, n, d)
	r.mu.total.Record(c, n, d)
}

// Total returns the counts of every operation since the recorder was
// made, all jobs together.
func (r *Recorder) Total() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.total
}

// Take returns what was counted since the last Take, one JobStats per job
// (nil if nothing was), and starts counting afresh. The caller owns the
// slice; if it cannot deliver it, it gives it back with Restore.
func (r *Recorder) Take() []JobStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.mu.pending) == 0 {
		return nil
	}
	out := make([]JobStats, 0, len(r.mu.pending))
	for job, s := range r.mu.pending {
		out = append(out, JobStats{Job: job, Stats: *s})
	}
	r.mu.pending = map[string]*Stats{}
	return out
}
