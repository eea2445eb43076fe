package mgmt

import (
	"strings"
	"testing"
	"time"
)

func TestAssess(t *testing.T) {
	const gib = 1 << 30
	tests := []struct {
		name   string
		in     HealthInput
		health string
		notes  []string // each must appear in some note, in this order
	}{
		{"fresh pool", HealthInput{M: 2, Current: true, Stripes: 100, Preservation: 2 * gib, PreservationLeft: 2 * gib},
			HealthOK, nil},
		{"rebuilt after one failure: healthy, replace the drive",
			HealthInput{M: 2, Current: true, Stripes: 100, Failed: []string{"d03"}, Preservation: 2 * gib, PreservationLeft: gib},
			HealthOK, []string{"drive d03 failed: replace it", "preservation capacity left: 1.0 GiB of 2.0 GiB"}},
		{"rebuilt after three failures: still healthy",
			HealthInput{M: 2, Current: true, Stripes: 100, Failed: []string{"d01", "d02", "d03"}, Preservation: 3 * gib, PreservationLeft: 0},
			HealthOK, []string{"d01 failed", "d02 failed", "d03 failed", "preservation capacity used up"}},
		{"one drive down in 8+2: degraded, not critical",
			HealthInput{M: 2, Current: true, Stripes: 100, Degraded: 30, Down: []DownDrive{{"d07", 9*time.Minute + 400*time.Millisecond}}},
			HealthDegraded, []string{"30 stripes miss fragments", "drive d07 down: declared failed and rebuilt in 9m0s unless it answers"}},
		{"one drive down in 4+1: critical",
			HealthInput{M: 1, Current: true, Stripes: 100, Critical: 30, Down: []DownDrive{{"d07", time.Minute}}},
			HealthCritical, []string{"30 stripes are one more drive failure away from data loss", "d07 down"}},
		{"rebuilding",
			HealthInput{M: 2, Current: true, Stripes: 100, Critical: 4, Degraded: 10, Failed: []string{"d01", "d02"},
				Active: true, Kind: "rebuild", Percent: 42, Rate: 100 << 20, ETA: 90 * time.Second},
			HealthCritical, []string{"4 stripes are one more", "10 stripes miss", "d01 failed", "d02 failed",
				"rebuild running: 42.0%, 100.0 MiB/s, ETA 1m30s"}},
		{"waiting for a down drive: critical",
			HealthInput{M: 2, Current: true, Stripes: 100, Waiting: 3, Critical: 3, Failed: []string{"d01"}, Down: []DownDrive{{"d02", time.Minute}, {"d03", time.Minute}}},
			HealthCritical, []string{"3 stripes are unreadable until a down drive returns"}},
		{"lost stripes",
			HealthInput{M: 2, Current: true, Stripes: 100, Lost: 5, LostFiles: 2, Critical: 20,
				Failed: []string{"d01", "d02", "d03"}, Incomplete: "9 drives up, 8+2 stripes need 10: replace or add drives"},
			HealthDataLoss, []string{"DATA LOSS: 5 stripes of 2 files", "20 stripes are one more", "d03 failed",
				"rebuild cannot finish: 9 drives up, 8+2 stripes need 10"}},
		{"blocked stripes",
			HealthInput{M: 2, Current: true, Stripes: 100, Degraded: 8, Blocked: 8, Failed: []string{"d01"}},
			HealthDegraded, []string{"8 stripes have no drive to rebuild onto"}},
		{"not yet scanned: one failure of two parity",
			HealthInput{M: 2, Current: false, Stripes: 100, Failed: []string{"d04"}},
			HealthDegraded, []string{"not yet checked", "d04 failed"}},
		{"not yet scanned: two failures of two parity",
			HealthInput{M: 2, Current: false, Stripes: 100, Failed: []string{"d04"}, Down: []DownDrive{{"d05", time.Minute}}},
			HealthCritical, []string{"not yet checked"}},
		{"not yet scanned, nothing away",
			HealthInput{M: 2, Current: false},
			HealthOK, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := Assess(tc.in)
			if a.Health != tc.health {
				t.Errorf("health %q, want %q (notes %q)", a.Health, tc.health, a.Notes)
			}
			i := 0
			for _, n := range a.Notes {
				if i < len(tc.notes) && strings.Contains(n, tc.notes[i]) {
					i++
				}
			}
			if i < len(tc.notes) {
				t.Errorf("notes %q lack %q (in order)", a.Notes, tc.notes[i:])
			}
			if len(tc.notes) == 0 && len(a.Notes) > 0 {
				t.Errorf("notes %q, want none", a.Notes)
			}
		})
	}
}

func TestWorse(t *testing.T) {
	order := []string{HealthOK, HealthDegraded, HealthCritical, HealthDataLoss}
	for i, a := range order {
		for j, b := range order {
			if got, want := worse(a, b), order[max(i, j)]; got != want {
				t.Errorf("worse(%q, %q) = %q, want %q", a, b, got, want)
			}
		}
	}
}
