package clustermap

import (
	"encoding/json"
	"errors"
	"maps"
	"testing"
	"time"

	"poolfs/internal/placement"
)

// testMap is a pool of n drives (8+2) in the given layout with spares
// drives of preservation.
func testMap(n, spares int, layout placement.Layout) *Map {
	m := &Map{Servers: []Server{{ID: "s0"}}}
	p := Pool{ID: 0, Name: "p", K: 8, M: 2, Unit: 1 << 20, PGs: 64, Layout: layout, Preservation: spares}
	for i := range n {
		id := placement.DriveID(i)
		m.Drives = append(m.Drives, Drive{ID: id, Server: "s0", Capacity: 1 << 30, State: StateUp})
		p.Drives = append(p.Drives, id)
	}
	m.Pools = []Pool{p}
	return m
}

func TestSetState(t *testing.T) {
	now := time.Unix(1000, 0)
	tests := []struct {
		from, to DriveState
		ok       bool
	}{
		{StateUp, StateDown, true},
		{StateUp, StateFailed, true},
		{StateDown, StateUp, true},
		{StateDown, StateFailed, true},
		{StateRebuilding, StateFailed, true},
		{StateFailed, StateUp, false},
		{StateFailed, StateDown, false},
		{StateOut, StateUp, false},
		{StateFailed, StateOut, true},
		{StateDown, StateDown, true}, // unchanged
	}
	for _, tc := range tests {
		t.Run(string(tc.from)+"->"+string(tc.to), func(t *testing.T) {
			m := testMap(12, 2, placement.Declustered)
			m.Drives[3].State = tc.from
			if tc.from == StateDown {
				m.Drives[3].DownSince = 1
			}
			changed, err := m.SetState(3, tc.to, now)
			if (err == nil) != tc.ok {
				t.Fatalf("err = %v, want ok %v", err, tc.ok)
			}
			if err != nil {
				if !errors.Is(err, ErrTransition) || m.Drives[3].State != tc.from {
					t.Fatalf("refused change: %v, state %s", err, m.Drives[3].State)
				}
				return
			}
			if changed != (tc.from != tc.to) || m.Drives[3].State != tc.to {
				t.Fatalf("changed %v, state %s", changed, m.Drives[3].State)
			}
			switch {
			case tc.to == StateDown && tc.from != StateDown && m.Drives[3].DownSince != now.UnixNano():
				t.Fatalf("DownSince %d, want %d", m.Drives[3].DownSince, now.UnixNano())
			case tc.to != StateDown && m.Drives[3].DownSince != 0:
				t.Fatalf("DownSince %d left in state %s", m.Drives[3].DownSince, tc.to)
			}
		})
	}
	if _, err := testMap(12, 2, placement.Declustered).SetState(99, StateDown, now); !errors.Is(err, ErrNoDrive) {
		t.Fatalf("unknown drive: %v", err)
	}
}

func TestGrace(t *testing.T) {
	m := testMap(12, 2, placement.Declustered)
	t0 := time.Unix(5000, 0)
	if _, err := m.SetState(4, StateDown, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := m.SetState(7, StateDown, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if left, down := m.GraceLeft(4, t0.Add(3*time.Minute)); !down || left != 7*time.Minute {
		t.Fatalf("GraceLeft(d04) = %v, %v, want 7m (default grace 10m)", left, down)
	}
	if _, down := m.GraceLeft(5, t0); down {
		t.Fatal("an up drive reported down")
	}
	if got := m.DownExpired(t0.Add(10*time.Minute - 1)); len(got) != 0 {
		t.Fatalf("expired before the grace: %v", got)
	}
	if got := m.DownExpired(t0.Add(10 * time.Minute)); len(got) != 1 || got[0] != 4 {
		t.Fatalf("expired at 10m: %v, want [d04]", got)
	}
	m.Pools[0].DownGrace = 2 * time.Second
	if got := m.DownExpired(t0.Add(61 * time.Second)); len(got) != 1 {
		t.Fatalf("pool grace 2s, at 61s: %v, want [d04]", got)
	}
	if got := m.DownExpired(t0.Add(62 * time.Second)); len(got) != 2 {
		t.Fatalf("pool grace 2s, at 62s: %v, want [d04 d07]", got)
	}
	for _, s := range []string{"0s", "500ms", "-1m", "31d", "soon", "999h"} {
		if _, err := ParseDownGrace(s); err == nil {
			t.Errorf("ParseDownGrace(%q) accepted", s)
		}
	}
	if d, err := ParseDownGrace("10m"); err != nil || d != 10*time.Minute {
		t.Errorf("ParseDownGrace(10m) = %v, %v", d, err)
	}
	m.Pools[0].DownGrace = -1
	if err := m.Validate(); !errors.Is(err, ErrInvalid) {
		t.Errorf("negative grace validated: %v", err)
	}
}

// TestRecordSpares: the map records the grouped layout's spare
// assignments, and a later failure elsewhere does not take a spare that is
// in use, also after the map went through JSON (as it does in the store).
func TestRecordSpares(t *testing.T) {
	m := testMap(22, 2, placement.Grouped) // groups d00-d09, d10-d19; spares d20, d21
	fail := func(id placement.DriveID) {
		t.Helper()
		if _, err := m.SetState(id, StateFailed, time.Time{}); err != nil {
			t.Fatal(err)
		}
		if err := m.RecordSpares(); err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		var next Map
		if err := json.Unmarshal(b, &next); err != nil {
			t.Fatal(err)
		}
		m = &next
	}
	fail(14)
	if want := map[placement.DriveID]placement.DriveID{14: 20}; !maps.Equal(m.Pools[0].HotSpareFor, want) {
		t.Fatalf("after d14: %v, want %v", m.Pools[0].HotSpareFor, want)
	}
	fail(3) // a lower group fails later: it gets d21, d14 keeps d20
	if want := map[placement.DriveID]placement.DriveID{14: 20, 3: 21}; !maps.Equal(m.Pools[0].HotSpareFor, want) {
		t.Fatalf("after d03: %v, want %v", m.Pools[0].HotSpareFor, want)
	}
	fail(5) // no spare left: group 0 is degraded, group 1 keeps its spare
	if want := map[placement.DriveID]placement.DriveID{14: 20, 3: 21}; !maps.Equal(m.Pools[0].HotSpareFor, want) {
		t.Fatalf("after d05: %v, want %v", m.Pools[0].HotSpareFor, want)
	}
	c := m.Clone()
	c.Pools[0].HotSpareFor[14] = 99
	if m.Pools[0].HotSpareFor[14] != 20 {
		t.Fatal("Clone shares HotSpareFor")
	}
}
