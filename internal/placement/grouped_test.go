package placement

import (
	"errors"
	"slices"
	"testing"
)

func groupedPool(k, m, n, spares int) *Pool {
	p := newPool(k, m, n)
	p.Layout, p.Spares, p.PGs = Grouped, spares, 64
	return p
}

func TestGroupedLayout(t *testing.T) {
	p := groupedPool(4, 2, 15, 2) // groups d00-d05, d06-d11; d12 unused; spares d13, d14
	if got, want := p.Groups(), [][]DriveID{{0, 1, 2, 3, 4, 5}, {6, 7, 8, 9, 10, 11}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("Groups() = %v, want %v", got, want)
	}
	if got := p.Unused(); !slices.Equal(got, []DriveID{12}) {
		t.Errorf("Unused() = %v, want [d12]", got)
	}
	if got := p.HotSpares(); !slices.Equal(got, []DriveID{13, 14}) {
		t.Errorf("HotSpares() = %v, want [d13 d14]", got)
	}
	m, err := p.Map()
	if err != nil {
		t.Fatal(err)
	}
	for pg, set := range m.Sets {
		if want := p.Groups()[pg%2]; !slices.Equal(set, want) {
			t.Fatalf("pg %d = %s, want group %d %s", pg, idsString(set), pg%2, idsString(want))
		}
	}
	if load := m.DriveLoad(); load[12] != 0 || load[13] != 0 || load[0] != 32 {
		t.Errorf("loads d12=%d d13=%d d00=%d, want 0, 0, 32", load[12], load[13], load[0])
	}
	if d := newPool(8, 2, 12); d.Groups() != nil || d.Unused() != nil || d.HotSpares() != nil {
		t.Error("declustered pool reports groups, unused drives or spares")
	}
}

func TestGroupedSpares(t *testing.T) {
	tests := []struct {
		name     string
		out      []DriveID
		group0   []DriveID
		group1   []DriveID
		degraded []int // groups
	}{
		{"healthy", nil, []DriveID{0, 1, 2, 3, 4, 5}, []DriveID{6, 7, 8, 9, 10, 11}, nil},
		{"one out", []DriveID{3}, []DriveID{0, 1, 2, 12, 4, 5}, []DriveID{6, 7, 8, 9, 10, 11}, nil},
		{"two out, two spares", []DriveID{9, 3}, []DriveID{0, 1, 2, 12, 4, 5}, []DriveID{6, 7, 8, 13, 10, 11}, nil},
		{"spare out", []DriveID{12, 7}, []DriveID{0, 1, 2, 3, 4, 5}, []DriveID{6, 13, 8, 9, 10, 11}, nil},
		{"no spare left", []DriveID{3, 7, 8}, []DriveID{0, 1, 2, 12, 4, 5}, []DriveID{6, 13, 8, 9, 10, 11}, []int{1}},
		{"both groups", []DriveID{1, 2, 3, 6}, []DriveID{0, 12, 13, 3, 4, 5}, []DriveID{6, 7, 8, 9, 10, 11}, []int{0, 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := groupedPool(4, 2, 14, 2) // spares d12, d13
			for _, id := range tc.out {
				p = setOut(p, id, true)
			}
			m, err := p.Map()
			if err != nil {
				t.Fatal(err)
			}
			for pg := range uint32(4) {
				set, err := m.Drives(pg)
				want := [][]DriveID{tc.group0, tc.group1}[pg%2]
				if !slices.Equal(set, want) {
					t.Errorf("pg %d = %s, want %s", pg, idsString(set), idsString(want))
				}
				one, err1 := p.PGDrives(pg)
				if !slices.Equal(one, set) || (err == nil) != (err1 == nil) {
					t.Errorf("pg %d: PGDrives %s, %v; map %s, %v", pg, idsString(one), err1, idsString(set), err)
				}
				if slices.Contains(tc.degraded, int(pg%2)) != errors.Is(err, ErrNotEnoughDrives) {
					t.Errorf("pg %d: err %v, degraded groups %v", pg, err, tc.degraded)
				}
			}
			if want := len(tc.degraded) * 32; len(m.Degraded) != want {
				t.Errorf("%d degraded PGs, want %d", len(m.Degraded), want)
			}
		})
	}
}
