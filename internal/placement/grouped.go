package placement

import "fmt"

// The grouped layout: classic RAID-6 volume groups plus hot spares.
//
// All drives (Out ones too, so that a failure never reshuffles the groups)
// are taken in ID order. The last Spares drives are hot spares; the rest are
// cut into groups of K+M consecutive drives, and drives left over that do not
// fill a group are unused (see Unused). PG pg belongs to group pg % groups
// and its drives are the group's drives in order.
//
// When a group's drive is Out, its slot is taken by the lowest-ID spare that
// is neither Out nor already standing in for another drive; Out group drives
// are served in ID order, so the assignment is deterministic. A group whose
// Out drive finds no spare is degraded: its PGs report ErrNotEnoughDrives.
//
// Growing a grouped pool by one drive changes which drives are spares, so
// grouped pools are reconfigured, not grown: that is one of the differences
// the layout exists to show.

type groupedLayout struct {
	groups   [][]DriveID // after spare substitution
	degraded []bool      // group lost a drive that no spare replaced
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
	gl := &groupedLayout{groups: idsOfGroups(groups), degraded: make([]bool, len(groups))}
	next := 0 // spares before next are Out or in use
	// Out group drives in ID order: groups are in ID order and so are their drives.
	for g, grp := range groups {
		for i, d := range grp {
			if !d.Out {
				continue
			}
			for next < len(spares) && spares[next].Out {
				next++
			}
			if next == len(spares) {
				gl.degraded[g] = true
				continue
			}
			gl.groups[g][i] = spares[next].ID
			next++
		}
	}
	return gl
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
