package placement

import (
	"errors"
	"fmt"
	"slices"
)

// PGMap is the placement of every PG of a pool, computed once per map
// epoch. It is a value: nothing in it aliases the Pool it was built from, and
// callers must not modify it.
type PGMap struct {
	// Pool is the snapshot the map was computed from, drives in ID order.
	Pool Pool
	// Sets[pg] lists the Width() drives of PG pg in fragment order. For a
	// degraded PG (grouped layout, no spare left) it holds the group's
	// drives with the unreplaced Out drives left in their slots.
	Sets [][]DriveID
	// Degraded lists, ascending, the PGs that could not get Width() usable
	// drives. Always empty for a declustered pool that passed Validate.
	Degraded []uint32
	// SpareFor is the grouped layout's hot spare assignments in effect
	// (Placer.SpareFor): record it for the next epoch. Nil if declustered.
	SpareFor map[DriveID]DriveID
}

// Map computes the drives of every PG. Errors are those of Validate; a
// grouped pool with degraded groups is not an error (see PGMap.Degraded).
func (p *Pool) Map() (*PGMap, error) {
	pl, err := p.Placer()
	if err != nil {
		return nil, err
	}
	return pl.Map(), nil
}

// Map computes the drives of every PG. It costs PGs times a PGDrives call
// and holds PGs*Width() drive IDs in one allocation.
func (pl *Placer) Map() *PGMap {
	m := &PGMap{Pool: pl.Pool(), Sets: make([][]DriveID, pl.pool.PGs), SpareFor: pl.SpareFor()}
	w := pl.width
	backing := make([]DriveID, pl.pool.PGs*w)
	scratch := make([]ranked, len(pl.cands))
	for pg := range m.Sets {
		out := backing[pg*w : pg*w : (pg+1)*w]
		var set []DriveID
		var err error
		if pl.grouped != nil {
			set, err = pl.grouped.pgDrives(&pl.pool, uint32(pg))
			out = append(out, set...)
		} else {
			out, err = pl.straw2(uint32(pg), out, scratch)
		}
		if err != nil {
			m.Degraded = append(m.Degraded, uint32(pg))
		}
		m.Sets[pg] = out
	}
	return m
}

// MapFrom is Map, with each PG's order reconciled with prev by StableOrder:
// a drive that keeps a PG keeps its fragment index, and new drives take the
// freed indices. Use it where fragments already exist (the map authority,
// from one epoch to the next); unlike Map, the result depends on history.
// prev may be nil, or a map of the same pool with the same PG count and width.
func (p *Pool) MapFrom(prev *PGMap) (*PGMap, error) {
	m, err := p.Map()
	if err != nil || prev == nil {
		return m, err
	}
	if len(prev.Sets) != len(m.Sets) || prev.Pool.Width() != m.Pool.Width() {
		return nil, fmt.Errorf("%w: pool %d: previous map has %d PGs of width %d, now %d of width %d",
			ErrInvalidPool, p.ID, len(prev.Sets), prev.Pool.Width(), len(m.Sets), m.Pool.Width())
	}
	for pg := range m.Sets {
		copy(m.Sets[pg], StableOrder(prev.Sets[pg], m.Sets[pg]))
	}
	return m, nil
}

// StableOrder reorders next so that every drive also in prev keeps prev's
// position; drives new to the set fill the remaining positions in next's
// order. It returns a new slice; if the lengths differ it returns a copy of
// next.
func StableOrder(prev, next []DriveID) []DriveID {
	out := slices.Clone(next)
	if len(prev) != len(next) {
		return out
	}
	taken := make([]bool, len(next))
	var fresh []DriveID
	for _, d := range next {
		if i := slices.Index(prev, d); i >= 0 {
			out[i] = d
			taken[i] = true
		} else {
			fresh = append(fresh, d)
		}
	}
	for i := range out {
		if !taken[i] {
			out[i], fresh = fresh[0], fresh[1:]
		}
	}
	return out
}

// Drives returns the drives of PG pg, like Placer.PGDrives but from the
// map: ErrPGOutOfRange, or ErrNotEnoughDrives (with the set) for a degraded
// PG. The returned slice belongs to the map; do not modify it.
func (m *PGMap) Drives(pg uint32) ([]DriveID, error) {
	if int64(pg) >= int64(len(m.Sets)) {
		return nil, fmt.Errorf("%w: pool %d: pg %d, want < %d", ErrPGOutOfRange, m.Pool.ID, pg, len(m.Sets))
	}
	if _, found := slices.BinarySearch(m.Degraded, pg); found {
		return m.Sets[pg], fmt.Errorf("%w: pool %d pg %d is degraded", ErrNotEnoughDrives, m.Pool.ID, pg)
	}
	return m.Sets[pg], nil
}

// PGsOf returns, ascending, the PGs that place a fragment on drive d: the
// PGs to rebuild when d fails.
func (m *PGMap) PGsOf(d DriveID) []uint32 {
	var out []uint32
	for pg, set := range m.Sets {
		if slices.Contains(set, d) {
			out = append(out, uint32(pg))
		}
	}
	return out
}

// DriveLoad returns the number of fragment slots (PG memberships) of every
// drive of the pool, zero included.
func (m *PGMap) DriveLoad() map[DriveID]int {
	loads := m.loads()
	out := make(map[DriveID]int, len(loads))
	for i, d := range m.Pool.Drives {
		out[d.ID] = loads[i]
	}
	return out
}

// loads returns the slot count of each drive of m.Pool.Drives (ID order).
func (m *PGMap) loads() []int {
	ds := m.Pool.Drives
	loads := make([]int, len(ds))
	if len(ds) == 0 {
		return loads
	}
	if maxID := ds[len(ds)-1].ID; int64(maxID) <= 4*int64(len(ds))+1024 {
		// Dense IDs (the usual case): count by ID without hashing.
		byID := make([]int, int(maxID)+1)
		for _, set := range m.Sets {
			for _, d := range set {
				if int64(d) < int64(len(byID)) {
					byID[d]++
				}
			}
		}
		for i, d := range ds {
			loads[i] = byID[d.ID]
		}
		return loads
	}
	index := make(map[DriveID]int, len(ds))
	for i, d := range ds {
		index[d.ID] = i
	}
	for _, set := range m.Sets {
		for _, d := range set {
			if i, ok := index[d]; ok {
				loads[i]++
			}
		}
	}
	return loads
}

// Shares returns, for every in-placement drive, its share of the fragment
// slots held by in-placement drives divided by its share of their weight:
// 1 is a perfectly balanced drive, 1.1 one that holds 10% more than its
// weight asks. Spares and unused drives of a grouped pool count with 0.
func (m *PGMap) Shares() map[DriveID]float64 {
	loads := m.loads()
	var slots, weight float64
	for i, d := range m.Pool.Drives {
		if !d.Out {
			slots += float64(loads[i])
			weight += d.Weight
		}
	}
	out := make(map[DriveID]float64)
	for i, d := range m.Pool.Drives {
		if !d.Out && slots > 0 {
			out[d.ID] = (float64(loads[i]) / slots) / (d.Weight / weight)
		}
	}
	return out
}

// Balance returns the largest value of Shares: max load / mean load over
// in-placement drives, weight-normalised. 1 is perfect.
func (m *PGMap) Balance() float64 {
	b := 0.0
	for _, s := range m.Shares() {
		b = max(b, s)
	}
	return b
}

// Movement compares two maps of the same pool (same PG count).
type Movement struct {
	PGs          int // PGs compared
	Slots        int // fragment slots in the new map
	ChangedPGs   int // PGs whose drive set changed
	MovedSlots   int // slots on a drive new to their PG: fragments to rebuild or copy
	ReorderedPGs int // PGs where a drive kept by the PG changed fragment index
	MaxReplaced  int // most drives replaced in one PG
}

// MovedFraction returns MovedSlots/Slots.
func (mv Movement) MovedFraction() float64 {
	if mv.Slots == 0 {
		return 0
	}
	return float64(mv.MovedSlots) / float64(mv.Slots)
}

// Moves compares old and new PG by PG. It returns an error if they do not
// have the same number of PGs (a PG count is fixed at pool creation).
func Moves(old, new *PGMap) (Movement, error) {
	if len(old.Sets) != len(new.Sets) {
		return Movement{}, errors.New("placement: cannot compare maps with different PG counts")
	}
	mv := Movement{PGs: len(new.Sets)}
	for pg, set := range new.Sets {
		mv.Slots += len(set)
		replaced, reordered := 0, false
		for i, d := range set {
			j := slices.Index(old.Sets[pg], d)
			if j < 0 {
				replaced++
			} else if j != i {
				reordered = true
			}
		}
		if replaced > 0 || len(set) != len(old.Sets[pg]) {
			mv.ChangedPGs++
		}
		if reordered {
			mv.ReorderedPGs++
		}
		mv.MovedSlots += replaced
		mv.MaxReplaced = max(mv.MaxReplaced, replaced)
	}
	return mv, nil
}
