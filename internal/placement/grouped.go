package placement

import (
	"fmt"
	"maps"
)

// The grouped layout: classic RAID-6 volume groups plus hot spares.
//
// All drives (Out ones too, so that a failure never reshuffles the groups)
// are taken in ID order. The last Spares drives are hot spares; the rest are
// cut into groups of K+M consecutive drives, and drives left over that do not
// fill a group are unused (see Unused). PG pg belongs to group pg % groups
// and its drives are the group's drives in order.
//
// When a group's drive is Out, a hot spare takes its slot. Assignments are
// sticky: Pool.SpareFor carries the previous epoch's assignments (the map
// authority records PGMap.SpareFor / Placer.SpareFor in the cluster map), and
// an assignment is kept for as long as its group drive is Out and its spare
// is not. Only then are the Out group drives still without a spare served,
// in ID order, with the lowest-ID spares that are neither Out nor taken. So a
// failure never moves a fragment that already sits on a spare: it only takes
// a free spare. (Without the record, the assignment would be a function of
// the set of Out drives, and a failure in a lower-ID group would take over
// the spare another group had already been rebuilt onto.) A group whose Out
// drive finds no spare is degraded: its PGs report ErrNotEnoughDrives. When
// the group drive comes back In, its slot returns to it and the spare is
// free again.
//
// Growing a grouped pool by one drive changes which drives are spares, so
// grouped pools are reconfigured, not grown: that is one of the differences
// the layout exists to show.

type groupedLayout struct {
	groups   [][]DriveID         // after spare substitution
	degraded []bool              // group lost a drive that no spare replaced
	spareFor map[DriveID]DriveID // Out group drive -> the spare in its slot
}

// layoutGroups cuts drives (sorted by ID) into groups, spares and unused.
func layoutGroups(sorted []Drive, width, spares int) (groups [][]Drive, spare, unused []Drive) {
	if spares < 0 || spares > len(sorted) || width < 1 {
		return nil, nil, nil
	}
	body := sorted[:len(sorted)-spares]
	spare = sorted[len(sorted)-spares:]
	n := len(body) / width
	for g := range n {
		groups = append(groups, body[g*width:(g+1)*width])
	}
	return groups, spare, body[n*width:]
}

func buildGrouped(p *Pool) *groupedLayout {
	groups, spares, _ := layoutGroups(p.Drives, p.Width(), p.Spares)
	gl := &groupedLayout{groups: idsOfGroups(groups), degraded: make([]bool, len(groups)),
		spareFor: map[DriveID]DriveID{}}
	usable := map[DriveID]bool{} // spares that are not Out
	for _, d := range spares {
		usable[d.ID] = !d.Out
	}
	taken := map[DriveID]bool{}
	// Keep the recorded assignments that still hold.
	for _, grp := range groups {
		for _, d := range grp {
			if sp, ok := p.SpareFor[d.ID]; ok && d.Out && usable[sp] && !taken[sp] {
				gl.spareFor[d.ID], taken[sp] = sp, true
			}
		}
	}
	// Serve the other Out group drives in ID order (groups are in ID order
	// and so are their drives) with the free spares in ID order.
	next := 0
	for g, grp := range groups {
		for i, d := range grp {
			if !d.Out {
				continue
			}
			if sp, ok := gl.spareFor[d.ID]; ok {
				gl.groups[g][i] = sp
				continue
			}
			for next < len(spares) && (spares[next].Out || taken[spares[next].ID]) {
				next++
			}
			if next == len(spares) {
				gl.degraded[g] = true
				continue
			}
			gl.groups[g][i] = spares[next].ID
			gl.spareFor[d.ID], taken[spares[next].ID] = spares[next].ID, true
			next++
		}
	}
	return gl
}

// SpareFor returns the hot spare assignments in effect: for each Out group
// drive of a grouped pool that a spare replaces, that spare. Record it and
// pass it as Pool.SpareFor to the next epoch's placement so that the
// assignments stick. Nil for the declustered layout; the caller owns the
// result.
func (pl *Placer) SpareFor() map[DriveID]DriveID {
	if pl.grouped == nil {
		return nil
	}
	return maps.Clone(pl.grouped.spareFor)
}

func (gl *groupedLayout) pgDrives(p *Pool, pg uint32) ([]DriveID, error) {
	g := int(pg) % len(gl.groups)
	ids := append([]DriveID(nil), gl.groups[g]...)
	if gl.degraded[g] {
		return ids, fmt.Errorf("%w: pool %d pg %d: group %d lost a drive and no hot spare is left",
			ErrNotEnoughDrives, p.ID, pg, g)
	}
	return ids, nil
}

// Groups returns the grouped layout's groups as configured, before spare
// substitution: drives in ID order, Width() drives each. Nil for the
// declustered layout. The caller owns the result.
func (p *Pool) Groups() [][]DriveID {
	if p.Layout != Grouped {
		return nil
	}
	groups, _, _ := layoutGroups(sortedDrives(p.Drives), p.Width(), p.Spares)
	return idsOfGroups(groups)
}

// HotSpares returns the grouped layout's hot spares in ID order, Out ones
// included. Nil for the declustered layout.
func (p *Pool) HotSpares() []DriveID {
	if p.Layout != Grouped {
		return nil
	}
	_, spares, _ := layoutGroups(sortedDrives(p.Drives), p.Width(), p.Spares)
	return idsOf(spares)
}

// Unused returns the drives that the layout never uses: in the grouped
// layout, the drives left over after cutting full groups (they are neither
// in a group nor spares). Always nil for the declustered layout, which uses
// every in-placement drive.
func (p *Pool) Unused() []DriveID {
	if p.Layout != Grouped {
		return nil
	}
	_, _, unused := layoutGroups(sortedDrives(p.Drives), p.Width(), p.Spares)
	return idsOf(unused)
}

func idsOf(ds []Drive) []DriveID {
	if len(ds) == 0 {
		return nil
	}
	ids := make([]DriveID, len(ds))
	for i, d := range ds {
		ids[i] = d.ID
	}
	return ids
}

func idsOfGroups(groups [][]Drive) [][]DriveID {
	var out [][]DriveID
	for _, g := range groups {
		out = append(out, idsOf(g))
	}
	return out
}
