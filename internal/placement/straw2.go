package placement

import (
	"fmt"
	"maps"
	"slices"
)

// Placer is a pool compiled for placement: validated, drives sorted, domain
// paths turned into indices, enforced levels chosen, grouped-layout spares
// assigned. It is immutable and safe for concurrent use. Build one per map
// epoch with Pool.Placer and call PGDrives per stripe, or build the whole
// PGMap once with Map.
type Placer struct {
	pool  Pool // private snapshot: Drives sorted by ID and deep-copied
	width int

	// Declustered.
	cands    []Drive   // in-placement drives in ID order
	invW     []float64 // 1/weight of each candidate
	uniform  bool      // all candidates weigh the same: rank by the hash, skip the logarithm
	levels   []level   // all failure-domain levels, top first
	enforced []int     // levels whose limit is kept, top first
	limit    int       // max fragments of a PG per domain at an enforced level

	// Grouped.
	grouped *groupedLayout
}

// Placer validates the pool and compiles it. The Placer does not alias the
// pool: later changes to p do not affect it. Errors are those of Validate.
func (p *Pool) Placer() (*Placer, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	pl := &Placer{pool: *p, width: p.Width()}
	pl.pool.Drives = sortedDrives(p.Drives)
	pl.pool.SpareFor = maps.Clone(p.SpareFor)
	if p.Layout == Grouped {
		pl.grouped = buildGrouped(&pl.pool)
		return pl, nil
	}
	depth := 0
	for _, d := range pl.pool.Drives {
		depth = max(depth, len(d.Domain))
		if !d.Out {
			pl.cands = append(pl.cands, d)
			pl.invW = append(pl.invW, 1/d.Weight)
		}
	}
	pl.uniform = true
	for _, d := range pl.cands {
		pl.uniform = pl.uniform && d.Weight == pl.cands[0].Weight
	}
	pl.levels = buildLevels(pl.cands, depth)
	pl.limit = domainLimit(p.M)
	pl.enforced = enforcedLevels(pl.levels, pl.limit, pl.width)
	return pl, nil
}

// Pool returns a copy of the pool the Placer was compiled from, drives in ID
// order. The caller owns the copy.
func (pl *Placer) Pool() Pool {
	p := pl.pool
	p.Drives = sortedDrives(pl.pool.Drives)
	p.SpareFor = maps.Clone(pl.pool.SpareFor)
	return p
}

// EnforcedLevels returns the failure-domain levels (0 = top of the Domain
// path) at which at most DomainLimit fragments of a PG share a domain. Levels
// not listed are too small for the scheme and are not enforced. Always empty
// for the grouped layout, whose groups are fixed by drive ID.
func (pl *Placer) EnforcedLevels() []int { return append([]int(nil), pl.enforced...) }

// DomainLimit returns the most fragments of one PG that may share a domain
// at an enforced level: M, or 1 when M = 0.
func (pl *Placer) DomainLimit() int { return domainLimit(pl.pool.M) }

// PGDrives returns the k+m distinct drives of PG pg, in fragment order
// (fragment i of every stripe of the PG lives on drive i). The caller owns
// the returned slice.
//
// Declustered: the result depends only on the pool's contents. It costs one
// hash (and, with unequal weights, one logarithm) per in-placement drive.
// Grouped: the drives of group pg % groups after spare substitution; if the
// group lost a drive and no spare was free, PGDrives returns the group's
// drives with the Out drive still in its slot (where the surviving fragments
// are) together with an error wrapping ErrNotEnoughDrives.
//
// It returns an error wrapping ErrPGOutOfRange if pg >= PGs.
func (pl *Placer) PGDrives(pg uint32) ([]DriveID, error) {
	if int64(pg) >= int64(pl.pool.PGs) {
		return nil, fmt.Errorf("%w: pool %d: pg %d, want < %d", ErrPGOutOfRange, pl.pool.ID, pg, pl.pool.PGs)
	}
	if pl.grouped != nil {
		return pl.grouped.pgDrives(&pl.pool, pg)
	}
	return pl.straw2(pg, make([]DriveID, 0, pl.width), make([]ranked, len(pl.cands)))
}

// PGDrives is a convenience for p.Placer() followed by PGDrives. Compiling
// costs O(N log N); callers placing many stripes should keep a Placer or a
// PGMap per map epoch.
func (p *Pool) PGDrives(pg uint32) ([]DriveID, error) {
	pl, err := p.Placer()
	if err != nil {
		return nil, err
	}
	return pl.PGDrives(pg)
}

// ranked is one drive's straw2 draw; i indexes Placer.cands.
type ranked struct {
	draw float64
	i    int32
}

// before reports whether a ranks before b: higher draw, then lower ID
// (candidates are in ID order, so the lower index).
func before(a, b ranked) bool {
	if a.draw != b.draw {
		return a.draw > b.draw
	}
	return a.i < b.i
}

func (pl *Placer) draw(base uint64, i int) ranked {
	if pl.uniform {
		return ranked{draw: straw2Uniform(base, pl.cands[i].ID), i: int32(i)} // same order as straw2Draw
	}
	return ranked{draw: straw2Draw(base, pl.cands[i].ID, pl.invW[i]), i: int32(i)}
}

// straw2 is rank-then-greedy selection. Every candidate draws a straw for
// this PG; drives are ranked by draw, highest first (ties: lower ID first).
// Walking the ranking, a drive is accepted unless one of its domains at an
// enforced level already holds `limit` fragments; the walk stops at width
// accepted drives, and the result is the acceptance order.
//
// Only the head of the ranking is usually needed, so the first pass keeps
// the top 1.5*width+2 draws in order (one comparison per drive for most drives)
// and walks them; only if they do not yield width drives is the full
// ranking sorted and walked, relaxing levels if even that fails.
//
// out (len 0, cap >= width) and scratch (len N) are the caller's buffers.
func (pl *Placer) straw2(pg uint32, out []DriveID, scratch []ranked) ([]DriveID, error) {
	base := pgSeed(pl.pool.ID, pg)
	n := len(pl.cands)
	t := min(n, pl.width+pl.width/2+2)
	top := scratch[:0]
	for i := range n {
		r := pl.draw(base, i)
		if len(top) == t && !before(r, top[t-1]) {
			continue
		}
		// Binary search for r's place in top, then shift the tail by one.
		lo, hi := 0, len(top)
		for lo < hi {
			mid := int(uint(lo+hi) >> 1)
			if before(top[mid], r) {
				lo = mid + 1
			} else {
				hi = mid
			}
		}
		if len(top) < t {
			top = append(top, r)
		}
		copy(top[lo+1:], top[lo:len(top)-1])
		top[lo] = r
	}
	if res, ok := pl.walk(top, pl.enforced, out); ok {
		return res, nil
	}
	ranking := scratch[:n]
	if t < n {
		for i := range n {
			ranking[i] = pl.draw(base, i)
		}
		slices.SortFunc(ranking, func(a, b ranked) int {
			switch {
			case a.i == b.i:
				return 0
			case before(a, b):
				return -1
			}
			return 1
		})
	}
	enforced := pl.enforced
	for {
		if res, ok := pl.walk(ranking, enforced, out); ok {
			return res, nil
		}
		if len(enforced) == 0 {
			// Only reachable with fewer than width candidates, which Validate rejects.
			return nil, fmt.Errorf("%w: pool %d pg %d: %d in-placement drives for width %d",
				ErrNotEnoughDrives, pl.pool.ID, pg, n, pl.width)
		}
		enforced = enforced[:len(enforced)-1] // relax the deepest enforced level
	}
}

// walk accepts drives from ranking, in order, under the domain caps of the
// given levels, until width are accepted. It reports whether it got there.
func (pl *Placer) walk(ranking []ranked, enforced []int, out []DriveID) ([]DriveID, bool) {
	out = out[:0]
	var counts [][]uint16
	for _, l := range enforced {
		counts = append(counts, make([]uint16, len(pl.levels[l].names)))
	}
	for _, r := range ranking {
		if len(out) == pl.width {
			break
		}
		ok := true
		for j, l := range enforced {
			if int(counts[j][pl.levels[l].dom[r.i]]) >= pl.limit {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		for j, l := range enforced {
			counts[j][pl.levels[l].dom[r.i]]++
		}
		out = append(out, pl.cands[r.i].ID)
	}
	return out, len(out) == pl.width
}
