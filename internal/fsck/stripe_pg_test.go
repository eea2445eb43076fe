package fsck

import (
	"fmt"
	"slices"
	"testing"

	"poolfs/internal/placement"
)

// TestLostRecordKeepsItsPG: a stripe record rebuilt from its fragments
// names the PG the stripe was written in, whether a client placed it by the
// map's stripe order (new files) or by the uniform hash placement used
// before (files written then), judged by the drives its fragments are on.
func TestLostRecordKeepsItsPG(t *testing.T) {
	p := &placement.Pool{ID: 3, K: 2, M: 1}
	for s := range 6 {
		for range 4 {
			p.Drives = append(p.Drives, placement.Drive{ID: placement.DriveID(len(p.Drives)), Weight: 1,
				Domain: []string{"", "", fmt.Sprintf("s%d", s)}})
		}
	}
	p.PGs = placement.DefaultPGs(len(p.Drives), p.Width())
	pm, err := p.Map()
	if err != nil {
		t.Fatal(err)
	}
	o := placement.NewStripeOrder(pm)
	found := func(pg uint32, n int) map[int]placement.DriveID {
		good := map[int]placement.DriveID{}
		for i, d := range pm.Sets[pg][:n] {
			good[i] = d
		}
		return good
	}
	checked := 0
	for ino := uint64(1); ino < 50; ino++ {
		for stripe := uint64(0); stripe < 4; stripe++ {
			pg, old := o.PG(ino, stripe), placement.PGOf(p.ID, ino, stripe, p.PGs)
			if slices.ContainsFunc(pm.Sets[pg], func(d placement.DriveID) bool { return slices.Contains(pm.Sets[old], d) }) {
				continue // the drives cannot tell them apart
			}
			checked++
			for _, n := range []int{p.K, p.Width()} {
				if got := stripePG(pm, o, p.ID, ino, stripe, found(pg, n)); got != pg {
					t.Fatalf("stripe %d of %d written by the order in PG %d (%d fragments found): rebuilt in PG %d", stripe, ino, pg, n, got)
				}
				if got := stripePG(pm, o, p.ID, ino, stripe, found(old, n)); got != old {
					t.Fatalf("stripe %d of %d written by the hash in PG %d (%d fragments found): rebuilt in PG %d", stripe, ino, old, n, got)
				}
			}
		}
	}
	if checked < 20 {
		t.Fatalf("only %d stripes whose two PGs differ in every drive", checked)
	}
}
