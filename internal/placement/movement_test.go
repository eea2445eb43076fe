package placement

import (
	"math"
	"slices"
	"testing"
)

// TestOutMovesOnlyItsPGs marks one drive Out: PGs without it must not change
// at all (same drives, same order), PGs with it must keep every other drive
// and gain exactly one.
func TestOutMovesOnlyItsPGs(t *testing.T) {
	tests := []struct {
		name string
		pool *Pool
		out  DriveID
	}{
		{"12/8+2", newPool(8, 2, 12), 3},
		{"60/8+2", newPool(8, 2, 60), 17},
		{"60/8+2/6 servers", withDomains(newPool(8, 2, 60), 6, 10), 3},
		{"60/8+3/3x4x5", withDomains(newPool(8, 3, 60), 3, 4, 5), 42},
		{"60/8+2/weights 1,1.5", withWeights(newPool(8, 2, 60), 1, 1.5), 0},
		{"240/16+4", newPool(16, 4, 240), 200},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.pool.PGs = min(tc.pool.PGs, 8192)
			before, err := tc.pool.Map()
			if err != nil {
				t.Fatal(err)
			}
			after, err := setOut(tc.pool, tc.out, true).Map()
			if err != nil {
				t.Fatal(err)
			}
			for pg, old := range before.Sets {
				now := after.Sets[pg]
				if !slices.Contains(old, tc.out) {
					if !slices.Equal(old, now) {
						t.Fatalf("pg %d did not hold %v but changed: %s -> %s", pg, tc.out, idsString(old), idsString(now))
					}
					continue
				}
				for _, d := range old {
					if d != tc.out && !slices.Contains(now, d) {
						t.Fatalf("pg %d lost %v as well as %v: %s -> %s", pg, d, tc.out, idsString(old), idsString(now))
					}
				}
			}
			mv, err := Moves(before, after)
			if err != nil {
				t.Fatal(err)
			}
			if load := before.DriveLoad()[tc.out]; mv.MovedSlots != load || mv.ChangedPGs != load || mv.MaxReplaced != 1 {
				t.Errorf("moves %+v, want %d moved slots in %d PGs, 1 per PG", mv, load, load)
			}
			t.Logf("out %v: %d of %d slots moved (%.2f%%), %d PGs reordered", tc.out,
				mv.MovedSlots, mv.Slots, 100*mv.MovedFraction(), mv.ReorderedPGs)
		})
	}
}

// TestAddMovesOneOverN adds drive N to a pool of N drives. Only PGs that
// accept the new drive change, each by exactly one drive (replaced by the new
// one). The fraction of slots moved is the new drive's share, whose
// expectation is 1/(N+1) for equal weights. Its count is close to binomial
// with at least 2000 slots per drive under DefaultPGs, so one standard
// deviation is under 2.3% of it; the ±10% tolerance is over 4 sd, the same
// bound the balance test puts on any drive.
func TestAddMovesOneOverN(t *testing.T) {
	tests := []struct {
		name   string
		pool   *Pool
		domain []string
	}{
		{"12/8+2", newPool(8, 2, 12), nil},
		{"60/8+2", newPool(8, 2, 60), nil},
		{"60/8+2/6 servers", withDomains(newPool(8, 2, 60), 6, 10), []string{"srv2"}},
		{"60/8+3/3x4x5", withDomains(newPool(8, 3, 60), 3, 4, 5), []string{"enc1", "drw0"}},
		{"240/8+2", newPool(8, 2, 240), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			n := len(tc.pool.Drives)
			grown := clonePool(tc.pool)
			added := DriveID(n)
			grown.Drives = append(grown.Drives, Drive{ID: added, Weight: 1, Domain: tc.domain})
			before, err := tc.pool.Map()
			if tc.name == "240/8+2" {
				before, err = map240()
			}
			if err != nil {
				t.Fatal(err)
			}
			after, err := grown.Map()
			if err != nil {
				t.Fatal(err)
			}
			for pg, now := range after.Sets {
				old := before.Sets[pg]
				if slices.Equal(old, now) {
					continue
				}
				if !slices.Contains(now, added) {
					t.Fatalf("pg %d changed without taking %v: %s -> %s", pg, added, idsString(old), idsString(now))
				}
				kept := 0
				for _, d := range old {
					if slices.Contains(now, d) {
						kept++
					}
				}
				if kept != len(old)-1 {
					t.Fatalf("pg %d replaced %d drives, want 1: %s -> %s", pg, len(old)-kept, idsString(old), idsString(now))
				}
			}
			mv, err := Moves(before, after)
			if err != nil {
				t.Fatal(err)
			}
			want := 1 / float64(n+1)
			got := mv.MovedFraction()
			t.Logf("add %v to %d drives: %.3f%% of slots moved, 1/(N+1) = %.3f%%; %d of %d PGs changed",
				added, n, 100*got, 100*want, mv.ChangedPGs, mv.PGs)
			if math.Abs(got/want-1) > 0.10 || mv.MaxReplaced != 1 {
				t.Errorf("moved %.3f%% of slots (max %d per PG), want %.3f%% ±10%%, 1 per PG",
					100*got, mv.MaxReplaced, 100*want)
			}
		})
	}
}

func TestStableOrder(t *testing.T) {
	tests := []struct{ prev, next, want []DriveID }{
		{[]DriveID{1, 2, 3, 4}, []DriveID{1, 2, 3, 4}, []DriveID{1, 2, 3, 4}},
		{[]DriveID{1, 2, 3, 4}, []DriveID{1, 3, 4, 9}, []DriveID{1, 9, 3, 4}}, // 2 left, 9 takes its index
		{[]DriveID{1, 2, 3, 4}, []DriveID{8, 4, 9, 1}, []DriveID{1, 8, 9, 4}},
		{[]DriveID{1, 2}, []DriveID{3, 4, 5}, []DriveID{3, 4, 5}},
	}
	for _, tc := range tests {
		if got := StableOrder(tc.prev, tc.next); !slices.Equal(got, tc.want) {
			t.Errorf("StableOrder(%v, %v) = %v, want %v", tc.prev, tc.next, got, tc.want)
		}
	}
}

// TestMapFrom checks that with MapFrom no surviving fragment changes index
// when a drive goes Out.
func TestMapFrom(t *testing.T) {
	p := newPool(8, 2, 60)
	p.PGs = 2048
	before, err := p.Map()
	if err != nil {
		t.Fatal(err)
	}
	after, err := setOut(p, 5, true).MapFrom(before)
	if err != nil {
		t.Fatal(err)
	}
	mv, err := Moves(before, after)
	if err != nil {
		t.Fatal(err)
	}
	if mv.ReorderedPGs != 0 || mv.MovedSlots != before.DriveLoad()[5] {
		t.Errorf("MapFrom moves %+v, want no reordering and %d moved slots", mv, before.DriveLoad()[5])
	}
	checkMap(t, setOut(p, 5, true), after)
}
