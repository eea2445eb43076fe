package placement

import (
	"errors"
	"math"
	"testing"
)

func TestValidate(t *testing.T) {
	ok := func() *Pool { return newPool(8, 2, 12) }
	tests := []struct {
		name   string
		edit   func(p *Pool)
		target error // nil: valid
	}{
		{"ok", func(p *Pool) {}, nil},
		{"k=0", func(p *Pool) { p.K = 0 }, ErrInvalidPool},
		{"m<0", func(p *Pool) { p.M = -1 }, ErrInvalidPool},
		{"m=0", func(p *Pool) { p.M = 0 }, nil},
		{"pgs=0", func(p *Pool) { p.PGs = 0 }, ErrInvalidPool},
		{"pgs too many", func(p *Pool) { p.PGs = MaxPGs + 1 }, ErrInvalidPool},
		{"duplicate id", func(p *Pool) { p.Drives[3].ID = 4 }, ErrInvalidPool},
		{"zero weight", func(p *Pool) { p.Drives[0].Weight = 0 }, ErrInvalidPool},
		{"NaN weight", func(p *Pool) { p.Drives[0].Weight = math.NaN() }, ErrInvalidPool},
		{"Inf weight", func(p *Pool) { p.Drives[0].Weight = math.Inf(1) }, ErrInvalidPool},
		{"bad layout", func(p *Pool) { p.Layout = 7 }, ErrInvalidPool},
		{"spares on declustered", func(p *Pool) { p.Spares = 1 }, ErrInvalidPool},
		{"too wide", func(p *Pool) { p.K = 11 }, ErrNotEnoughDrives},
		{"too many out", func(p *Pool) { p.Drives[0].Out, p.Drives[1].Out, p.Drives[2].Out = true, true, true }, ErrNotEnoughDrives},
		{"exactly width in", func(p *Pool) { p.Drives[0].Out, p.Drives[1].Out = true, true }, nil},
		{"grouped ok", func(p *Pool) { p.Layout, p.Spares = Grouped, 2 }, nil},
		{"grouped out is not an error", func(p *Pool) { p.Layout, p.Spares, p.Drives[0].Out = Grouped, 2, true }, nil},
		{"grouped too many spares", func(p *Pool) { p.Layout, p.Spares = Grouped, 3 }, ErrNotEnoughDrives},
		{"grouped negative spares", func(p *Pool) { p.Layout, p.Spares = Grouped, -1 }, ErrInvalidPool},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := ok()
			tc.edit(p)
			err := p.Validate()
			if tc.target == nil {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, tc.target) {
				t.Fatalf("Validate() = %v, want %v", err, tc.target)
			}
			t.Logf("%v", err) // the message an operator sees
		})
	}
}

func TestDefaultPGs(t *testing.T) {
	tests := []struct{ drives, width, want int }{
		{12, 10, 4096},  // 2400 -> 4096
		{60, 10, 16384}, // 12000 -> 16384
		{240, 10, 65536},
		{240, 20, 32768},
		{4, 4, 2048},
		{0, 10, 64},
		{3, 0, 8192},
		{1 << 20, 1, MaxPGs},
	}
	for _, tc := range tests {
		if got := DefaultPGs(tc.drives, tc.width); got != tc.want {
			t.Errorf("DefaultPGs(%d, %d) = %d, want %d", tc.drives, tc.width, got, tc.want)
		}
	}
}

func TestDriveID(t *testing.T) {
	for _, tc := range []struct {
		id   DriveID
		name string
	}{{0, "d00"}, {7, "d07"}, {123, "d123"}} {
		if got := tc.id.String(); got != tc.name {
			t.Errorf("DriveID(%d).String() = %q, want %q", tc.id, got, tc.name)
		}
		if got, err := ParseDriveID(tc.name); err != nil || got != tc.id {
			t.Errorf("ParseDriveID(%q) = %v, %v; want %v", tc.name, got, err, tc.id)
		}
	}
	if _, err := ParseDriveID("disk7"); err == nil {
		t.Error("ParseDriveID(disk7) succeeded, want error")
	}
}

func TestLayoutString(t *testing.T) {
	for _, l := range []Layout{Declustered, Grouped} {
		got, err := ParseLayout(l.String())
		if err != nil || got != l {
			t.Errorf("ParseLayout(%q) = %v, %v", l.String(), got, err)
		}
	}
	if _, err := ParseLayout("raid5"); err == nil {
		t.Error("ParseLayout(raid5) succeeded, want error")
	}
}

// TestPGOf checks that stripes spread uniformly over PGs and that the hash is
// stable: the pinned values must never change, or every existing file moves.
func TestPGOf(t *testing.T) {
	pinned := []struct {
		pool       uint32
		ino, strip uint64
		pgs        int
		want       uint32
	}{
		{1, 1, 0, 1024, 702},
		{7, 1 << 40, 12345, 65536, 26504},
		{0, 0, 0, 64, 48},
	}
	for _, p := range pinned {
		if got := PGOf(p.pool, p.ino, p.strip, p.pgs); got != p.want {
			t.Errorf("PGOf(%d, %d, %d, %d) = %d, want %d (the stripe hash must never change)",
				p.pool, p.ino, p.strip, p.pgs, got, p.want)
		}
	}
	if a, b := PGOf(1, 42, 7, 4096), PGOf(1, 42, 7, 4096); a != b {
		t.Fatalf("PGOf not deterministic: %d then %d", a, b)
	}
	const pgs, stripes = 256, 256 * 400
	count := make([]int, pgs)
	for ino := uint64(1); ino <= 400; ino++ {
		for s := uint64(0); s < 256; s++ {
			pg := PGOf(3, ino, s, pgs)
			if pg >= pgs {
				t.Fatalf("PGOf = %d, want < %d", pg, pgs)
			}
			count[pg]++
		}
	}
	// Chi-squared with 255 degrees of freedom: mean 255, sd ~22.6; 400 is >6 sd.
	mean := float64(stripes) / pgs
	chi := 0.0
	for _, c := range count {
		chi += (float64(c) - mean) * (float64(c) - mean) / mean
	}
	if chi > 400 {
		t.Errorf("PGOf not uniform: chi-squared %.0f over 255 degrees of freedom", chi)
	}
}
