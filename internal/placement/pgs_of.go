package placement

// PGsOf returns, ascending, the PGs whose drives include d: the PGs that a
// failure of d degrades. It gives the same answer as scanning the sets of
// Map, at a fraction of the cost for a large declustered pool without
// enforced failure domains: there d is in a PG's set exactly when fewer
// than width drives rank before it, so each PG's scan stops as soon as
// width drives do (about width·(1+ln(N/width)) hashes per PG instead of N).
// With enforced domain levels, and in the grouped layout, it computes each
// PG's drives. An unknown or Out drive is in no declustered PG.
func (pl *Placer) PGsOf(d DriveID) []uint32 {
	var out []uint32
	if pl.grouped != nil || len(pl.enforced) > 0 {
		scratch := make([]ranked, len(pl.cands))
		buf := make([]DriveID, 0, pl.width)
		for pg := range uint32(pl.pool.PGs) {
			var set []DriveID
			if pl.grouped != nil {
				set, _ = pl.grouped.pgDrives(&pl.pool, pg)
			} else if s, err := pl.straw2(pg, buf[:0], scratch); err == nil {
				set = s
			}
			for _, id := range set {
				if id == d {
					out = append(out, pg)
					break
				}
			}
		}
		return out
	}
	idx := -1
	for i, c := range pl.cands {
		if c.ID == d {
			idx = i
		}
	}
	if idx < 0 {
		return nil
	}
	for pg := range uint32(pl.pool.PGs) {
		base := pgSeed(pl.pool.ID, pg)
		mine := pl.draw(base, idx)
		ahead := 0
		for i := range pl.cands {
			if i != idx && before(pl.draw(base, i), mine) {
				if ahead++; ahead == pl.width {
					break
				}
			}
		}
		if ahead < pl.width {
			out = append(out, pg)
		}
	}
	return out
}
