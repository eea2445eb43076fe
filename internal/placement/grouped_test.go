package placement

import (
	"errors"
	"fmt"
	"math/rand/v2"
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

// TestGroupedSparesStick is the property of sticky hot spares: along any
// sequence of failures, with each epoch's assignments (PGMap.SpareFor)
// passed to the next, a slot that a spare holds keeps that spare until the
// spare itself fails, so no fragment already rebuilt onto a spare ever
// moves; a free spare is never left idle while a group lacks one; no spare
// serves two slots; and recomputing an epoch from its own record changes
// nothing (the record is a fixpoint, so every process computes the same).
func TestGroupedSparesStick(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 2))
	for trial := range 300 {
		groups, spares := 1+rng.IntN(4), rng.IntN(5)
		p := groupedPool(4, 2, groups*6+rng.IntN(3)+spares, spares)
		prev, err := p.Map()
		if err != nil {
			t.Fatal(err)
		}
		order := rng.Perm(len(p.Drives))
		for step, victim := range order[:rng.IntN(len(order))+1] {
			p = setOut(p, DriveID(victim), true)
			p.SpareFor = prev.SpareFor
			next, err := p.Map()
			if err != nil {
				t.Fatal(err)
			}
			where := fmt.Sprintf("trial %d step %d (d%02d out, spares %v)", trial, step, victim, p.HotSpares())
			checkSparesStick(t, where, p, prev, next)
			again := *p
			again.SpareFor = next.SpareFor
			if m2, _ := again.Map(); !slices.EqualFunc(m2.Sets, next.Sets, slices.Equal) {
				t.Fatalf("%s: recomputing from the recorded assignment changes the placement", where)
			}
			prev = next
		}
	}
}

func checkSparesStick(t *testing.T, where string, p *Pool, prev, next *PGMap) {
	t.Helper()
	out := map[DriveID]bool{}
	for _, d := range p.Drives {
		out[d.ID] = d.Out
	}
	spare := map[DriveID]bool{}
	for _, id := range p.HotSpares() {
		spare[id] = true
	}
	used := map[DriveID]bool{}
	for g := range p.Groups() {
		for i := range p.Width() {
			was, is := prev.Sets[g][i], next.Sets[g][i]
			if spare[was] && !out[was] && is != was {
				t.Fatalf("%s: group %d slot %d moved from spare %v to %v", where, g, i, was, is)
			}
			if spare[is] {
				if used[is] {
					t.Fatalf("%s: spare %v serves two slots", where, is)
				}
				used[is] = true
			}
		}
	}
	idle := 0
	for id := range spare {
		if !out[id] && !used[id] {
			idle++
		}
	}
	if idle > 0 && len(next.Degraded) > 0 {
		t.Fatalf("%s: %d spares idle while %d PGs are degraded", where, idle, len(next.Degraded))
	}
}

// TestGroupedSpareReturns: when a replaced group drive comes back In, its
// slot returns to it and only that slot changes; its spare is free again
// and takes the next failure.
func TestGroupedSpareReturns(t *testing.T) {
	p := groupedPool(4, 2, 14, 2) // groups d00-d05, d06-d11; spares d12, d13
	step := func(q *Pool, prev *PGMap) (*Pool, *PGMap) {
		q.SpareFor = prev.SpareFor
		m, err := q.Map()
		if err != nil {
			t.Fatal(err)
		}
		return q, m
	}
	m0, _ := p.Map()
	p, m1 := step(setOut(p, 9, true), m0) // d09 -> d12
	p, m2 := step(setOut(p, 3, true), m1) // d03 -> d13, d09 keeps d12
	if !slices.Equal(m2.Sets[1], []DriveID{6, 7, 8, 12, 10, 11}) || !slices.Equal(m2.Sets[0], []DriveID{0, 1, 2, 13, 4, 5}) {
		t.Fatalf("after d09 then d03 out: %s %s", idsString(m2.Sets[0]), idsString(m2.Sets[1]))
	}
	p, m3 := step(setOut(p, 9, false), m2) // d09 back: its slot returns, d12 is free
	if !slices.Equal(m3.Sets[1], p.Groups()[1]) || !slices.Equal(m3.Sets[0], m2.Sets[0]) {
		t.Fatalf("after d09 back: %s %s", idsString(m3.Sets[0]), idsString(m3.Sets[1]))
	}
	_, m4 := step(setOut(p, 0, true), m3) // d00 takes the freed d12
	if !slices.Equal(m4.Sets[0], []DriveID{12, 1, 2, 13, 4, 5}) {
		t.Fatalf("after d00 out: %s", idsString(m4.Sets[0]))
	}
}
