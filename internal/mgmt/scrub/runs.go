package scrub

import (
	"context"
	"strconv"
	"time"

	"poolfs/internal/recovery"
)

// checkpointEvery is how often a running pass records its progress.
const checkpointEvery = time.Second

// Record is a pass under way, as Runs keeps it: where it resumes and what
// it counted before that point.
type Record struct {
	Pool    string `json:"pool"`
	Started int64  `json:"started"` // unix ns
	NextPG  uint32 `json:"next_pg"` // PGs below it are checked
	Counts
}

// Counts are the counts of a pass (Status's).
type Counts struct {
	Checked      int   `json:"checked"`
	Bytes        int64 `json:"bytes"`
	Skipped      int   `json:"skipped"`
	Missing      int   `json:"missing"`
	Checksum     int   `json:"checksum"`
	Inconsistent int   `json:"inconsistent"`
	Repaired     int   `json:"repaired"`
}

func (c *Counts) add(r result) {
	c.Checked++
	c.Bytes += r.bytes
	c.Missing += r.missing
	c.Checksum += r.checksum
	c.Inconsistent += r.inconsistent
	c.Repaired += r.repaired
	if r.skipped {
		c.Skipped++
	}
}

func (c *Counts) plus(o Counts) {
	c.Checked += o.Checked
	c.Bytes += o.Bytes
	c.Skipped += o.Skipped
	c.Missing += o.Missing
	c.Checksum += o.Checksum
	c.Inconsistent += o.Inconsistent
	c.Repaired += o.Repaired
}

// status sets st's counts to c.
func (c Counts) status(st *Status) {
	st.Checked, st.Bytes, st.Skipped = c.Checked, c.Bytes, c.Skipped
	st.Missing, st.Checksum, st.Inconsistent, st.Repaired = c.Missing, c.Checksum, c.Inconsistent, c.Repaired
	st.Bad = c.Missing + c.Checksum + c.Inconsistent
}

// save records pool's pass (del: removes the record); a failure is
// logged: it costs only the resumption of the pass.
func (s *Scheduler) save(ctx context.Context, pool uint32, r Record, del bool) {
	err := s.d.Runs.Set(ctx, strconv.FormatUint(uint64(pool), 10), r, del)
	if err != nil && ctx.Err() == nil {
		s.d.Log.Warn("record scrub progress", "pool", pool, "err", err)
	}
}

// Resume starts again the pass a stored record describes, if any and no
// pass runs; the record of a pool that is gone is removed.
func (s *Scheduler) Resume(ctx context.Context) {
	recs, err := s.d.Runs.Load(ctx)
	if err != nil {
		s.d.Log.Warn("read scrub progress", "err", err)
		return
	}
	for key, r := range recs {
		id, err := strconv.ParseUint(key, 10, 32)
		if err != nil {
			s.d.Log.Warn("stored scrub progress", "pool", key)
			continue
		}
		m, err := s.d.Maps.Map(ctx)
		if err != nil {
			return
		}
		p, err := m.Pool(uint32(id))
		if err != nil { // the pool is gone: so is its pass
			s.save(ctx, uint32(id), Record{}, true)
			continue
		}
		if err := s.start(ctx, p, &r); err != nil {
			s.d.Log.Warn("resume scrub", "pool", p.Name, "err", err)
		}
		return // one pass at a time
	}
}

// progress follows which stripes of a pass are checked, to record the
// first PG not yet checked whole and the counts before it.
type progress struct {
	stripes   []recovery.Stripe // in PG order
	results   []result
	done      []bool
	next      int    // stripes[:next] are all checked
	committed Counts // of the whole PGs before stripes[next]'s group, and the base
	group     Counts // of stripes[:next] in the group of stripes[next-1]
}

// checked notes stripe i's result. The caller serializes calls.
func (p *progress) checked(i int, r result) {
	p.results[i], p.done[i] = r, true
	for p.next < len(p.stripes) && p.done[p.next] {
		if p.next > 0 && p.stripes[p.next].PG != p.stripes[p.next-1].PG {
			p.committed.plus(p.group)
			p.group = Counts{}
		}
		p.group.add(p.results[p.next])
		p.next++
	}
}

// record is the progress to store, for a pool of pgs PGs.
func (p *progress) record(base Record, pgs int) Record {
	r := base
	r.Counts = p.committed
	switch {
	case p.next == len(p.stripes):
		r.plus(p.group)
		r.NextPG = uint32(pgs)
	case p.next > 0 && p.stripes[p.next].PG != p.stripes[p.next-1].PG:
		r.plus(p.group)
		r.NextPG = p.stripes[p.next].PG
	default:
		r.NextPG = p.stripes[p.next].PG
	}
	return r
}
