package mgmt

import (
	"context"
	"strconv"
	"time"

	"poolfs/internal/recovery"
)

// A scrub pass under way is kept in the metadata store (blob scrub.runs,
// by pool), so that a management service that takes over (or one
// restarted) carries it on where its predecessor left it rather than
// starting again or losing it. The stripes of a pool are checked in
// placement group order; the record names the first PG not yet checked
// whole and the counts of the PGs before it, and is written every
// scrubCheckpoint while the pass runs. A pass that finishes or is stopped
// (`poolfs scrub stop`) removes it; one whose coordinator ends (the
// leader loses its lease, the service stops) keeps it, and the
// coordinator that runs next resumes it from that PG, with the same start
// and counts. Files found unrecoverable before the takeover are in the
// events, not in the resumed pass's list.
const scrubBlob = "scrub.runs"

// scrubCheckpoint is how often a running pass records its progress.
const scrubCheckpoint = time.Second

// scrubRecord is a pass under way: where it resumes and what it counted
// before that point.
type scrubRecord struct {
	Pool    string `json:"pool"`
	Started int64  `json:"started"` // unix ns
	NextPG  uint32 `json:"next_pg"` // PGs below it are checked
	scrubCounts
}

// scrubCounts are the counts of a pass (ScrubStatus's).
type scrubCounts struct {
	Checked      int   `json:"checked"`
	Bytes        int64 `json:"bytes"`
	Skipped      int   `json:"skipped"`
	Missing      int   `json:"missing"`
	Checksum     int   `json:"checksum"`
	Inconsistent int   `json:"inconsistent"`
	Repaired     int   `json:"repaired"`
}

func (c *scrubCounts) add(r scrubResult) {
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

func (c *scrubCounts) plus(o scrubCounts) {
	c.Checked += o.Checked
	c.Bytes += o.Bytes
	c.Skipped += o.Skipped
	c.Missing += o.Missing
	c.Checksum += o.Checksum
	c.Inconsistent += o.Inconsistent
	c.Repaired += o.Repaired
}

// status sets st's counts to c.
func (c scrubCounts) status(st *ScrubStatus) {
	st.Checked, st.Bytes, st.Skipped = c.Checked, c.Bytes, c.Skipped
	st.Missing, st.Checksum, st.Inconsistent, st.Repaired = c.Missing, c.Checksum, c.Inconsistent, c.Repaired
	st.Bad = c.Missing + c.Checksum + c.Inconsistent
}

// saveScrub records pool's pass (del: removes the record); a failure is
// logged: it costs only the resumption of the pass.
func (s *Service) saveScrub(ctx context.Context, pool uint32, r scrubRecord, del bool) {
	err := setBlobMapEntry(ctx, s.store, scrubBlob, strconv.FormatUint(uint64(pool), 10), r, del)
	if err != nil && ctx.Err() == nil {
		s.log.Warn("record scrub progress", "pool", pool, "err", err)
	}
}

// resumeScrub starts again the pass a stored record describes, if any
// and no pass runs.
func (s *Service) resumeScrub(ctx context.Context) {
	recs, _, err := loadBlobMap[scrubRecord](ctx, s.store, scrubBlob)
	if err != nil {
		s.log.Warn("read scrub progress", "err", err)
		return
	}
	for key, r := range recs {
		id, err := strconv.ParseUint(key, 10, 32)
		if err != nil {
			s.log.Warn("stored scrub progress", "pool", key)
			continue
		}
		m, err := s.Map(ctx)
		if err != nil {
			return
		}
		p, err := m.Pool(uint32(id))
		if err != nil { // the pool is gone: so is its pass
			s.saveScrub(ctx, uint32(id), scrubRecord{}, true)
			continue
		}
		if err := s.startScrub(ctx, p, &r); err != nil {
			s.log.Warn("resume scrub", "pool", p.Name, "err", err)
		}
		return // one pass at a time
	}
}

// scrubProgress follows which stripes of a pass are checked, to record
// the first PG not yet checked whole and the counts before it.
type scrubProgress struct {
	stripes   []recovery.Stripe // in PG order
	results   []scrubResult
	done      []bool
	next      int         // stripes[:next] are all checked
	committed scrubCounts // of the whole PGs before stripes[next]'s group, and the base
	group     scrubCounts // of stripes[:next] in the group of stripes[next-1]
}

// checked notes stripe i's result. The caller serializes calls.
func (p *scrubProgress) checked(i int, r scrubResult) {
	p.results[i], p.done[i] = r, true
	for p.next < len(p.stripes) && p.done[p.next] {
		if p.next > 0 && p.stripes[p.next].PG != p.stripes[p.next-1].PG {
			p.committed.plus(p.group)
			p.group = scrubCounts{}
		}
		p.group.add(p.results[p.next])
		p.next++
	}
}

// record is the progress to store, for a pool of pgs PGs.
func (p *scrubProgress) record(base scrubRecord, pgs int) scrubRecord {
	r := base
	r.scrubCounts = p.committed
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
