package detect

import (
	"strings"
	"testing"
	"time"

	"poolfs/internal/placement"
)

// TestSlow: a drive is flagged after Probes slow probes, judged
// against the median of its peers (not the floor alone), told to go down
// only once flagged and past DownAfter Probes times, and cleared after
// Probes normal probes; a probe given up (DownAfter) never clears a flag,
// however slow the peers, but does not flag a drive as slow as its peers.
func TestSlow(t *testing.T) {
	p := Policy{Floor: 10 * time.Millisecond, Factor: 10, Probes: 2, DownAfter: time.Second}
	const ms = time.Millisecond
	for _, tc := range []struct {
		name  string
		peers time.Duration   // latency of drives 1..5
		lats  []time.Duration // drive 0's probes
		want  []Verdict
		later time.Duration // if set, the peers' latency from drive 0's fourth probe on
	}{
		{"fast like its peers", ms, []time.Duration{ms, 2 * ms, ms}, []Verdict{Same, Same, Same}, 0},
		{"above the floor, not above its peers", 50 * ms, []time.Duration{200 * ms, 300 * ms, 200 * ms}, []Verdict{Same, Same, Same}, 0},
		{"one slow probe is not enough", ms, []time.Duration{200 * ms, ms, 200 * ms, ms}, []Verdict{Same, Same, Same, Same}, 0},
		{"slow, then cleared", ms, []time.Duration{200 * ms, 200 * ms, 200 * ms, ms, ms, ms},
			[]Verdict{Same, Flagged, Same, Same, Cleared, Same}, 0},
		{"past DownAfter: down", ms, []time.Duration{2 * time.Second, 2 * time.Second, 2 * time.Second, 2 * time.Second},
			[]Verdict{Same, Flagged, Down, Down}, 0},
		{"down, then its peers slow too", ms, []time.Duration{2 * time.Second, 2 * time.Second, 2 * time.Second, time.Second, time.Second, time.Second, time.Second},
			[]Verdict{Same, Flagged, Down, Down, Down, Down, Down}, 500 * ms},
		{"given up like its peers' probes", 500 * ms, []time.Duration{time.Second, time.Second, time.Second}, []Verdict{Same, Same, Same}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := NewSlow(p)
			for i, lat := range tc.lats {
				peers := tc.peers
				if tc.later != 0 && i >= 3 {
					peers = tc.later
				}
				for id := placement.DriveID(1); id < 6; id++ {
					d.Observe(id, peers)
				}
				if got := d.Observe(0, lat); got != tc.want[i] {
					t.Fatalf("probe %d (%v): verdict %d, want %d", i, lat, got, tc.want[i])
				}
			}
		})
	}
}

// TestDescKeptForget: a flagged drive is described against its peers'
// bound; that it was kept up for its pool's width is news once per
// flagging; a forgotten drive starts again with no latency.
func TestDescKeptForget(t *testing.T) {
	d := NewSlow(Policy{Floor: 10 * time.Millisecond, Factor: 10, Probes: 1, DownAfter: time.Second})
	for id := placement.DriveID(1); id < 4; id++ {
		d.Observe(id, 5*time.Millisecond)
	}
	if _, slow := d.Desc(0); slow || d.MarkKept(0) {
		t.Fatal("an unknown drive is described as slow or kept")
	}
	if v := d.Observe(0, 300*time.Millisecond); v != Flagged {
		t.Fatalf("verdict %d, want Flagged", v)
	}
	desc, slow := d.Desc(0)
	if !slow || desc != "slow: probes take 300ms, slow above 50ms" {
		t.Fatalf("desc %q (%v)", desc, slow)
	}
	if !d.MarkKept(0) || d.MarkKept(0) {
		t.Fatal("kept up is not news exactly once")
	}
	d.Observe(0, 5*time.Millisecond) // cleared
	if v := d.Observe(0, 300*time.Millisecond); v != Flagged || !d.MarkKept(0) {
		t.Fatalf("flagged again (%d): kept up is news again", v)
	}
	d.Forget(0)
	if lat := d.Latency(0); lat != 0 {
		t.Fatalf("latency of a forgotten drive %v", lat)
	}
	if _, slow := d.Desc(0); slow {
		t.Fatal("a forgotten drive is still slow")
	}
}

// TestPolicyValidate: the defaults are valid, and each bad field is
// named.
func TestPolicyValidate(t *testing.T) {
	if err := DefaultPolicy().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for _, tc := range []struct {
		name string
		set  func(p *Policy)
		want string
	}{
		{"floor", func(p *Policy) { p.Floor = 0 }, "floor"},
		{"factor", func(p *Policy) { p.Factor = 1.5 }, "factor"},
		{"probes", func(p *Policy) { p.Probes = 0 }, "probes"},
		{"down-after below the floor", func(p *Policy) { p.DownAfter = p.Floor }, "down-after"},
		{"down-after above the probe limit", func(p *Policy) { p.DownAfter = MaxDownAfter + time.Second }, "down-after"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := DefaultPolicy()
			tc.set(&p)
			if err := p.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate: %v, want an error naming %s", err, tc.want)
			}
		})
	}
}
