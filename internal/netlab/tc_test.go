package netlab

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

// TestLimitRate puts a token bucket of the given rate on both ends of a
// host's link, and a second call replaces it. The switch's end queues at
// least PortQueue bytes, as a switch port does, whatever the rate.
func TestLimitRate(t *testing.T) {
	lab := New(t)
	h := lab.AddHost("a")
	if err := h.LimitRate(0); err == nil {
		t.Fatal("a rate of 0 was accepted")
	}
	for _, rate := range []int64{32e6, 100e6} {
		if err := h.LimitRate(rate); err != nil {
			t.Fatal(err)
		}
		want := map[int64]string{32e6: "rate 32Mbit", 100e6: "rate 100Mbit"}[rate]
		for _, end := range [][2]string{{h.NS, "eth0"}, {lab.sw, h.port}} {
			out, err := exec.Command("tc", "-n", end[0], "qdisc", "show", "dev", end[1]).CombinedOutput()
			if err != nil {
				t.Fatalf("tc: %v: %s", err, out)
			}
			if q := strings.TrimSpace(string(out)); strings.Count(q, "\n") != 0 || !strings.HasPrefix(q, "qdisc tbf") || !strings.Contains(q, want) {
				t.Errorf("%s of %s: %q, want one tbf qdisc with %s", end[1], end[0], q, want)
			}
		}
		if q := portQueue(t, lab.sw, h.port); q < PortQueue*99/100 {
			t.Errorf("at %d bit/s the switch port queues %d bytes, want %d", rate, q, PortQueue)
		}
	}
}

// portQueue is the bytes the tbf qdisc of dev in namespace ns queues
// before it drops: tc shows them as the time its rate takes to send them
// beyond the bucket.
func portQueue(t *testing.T, ns, dev string) int64 {
	t.Helper()
	out, err := exec.Command("tc", "-j", "-n", ns, "qdisc", "show", "dev", dev).Output()
	if err != nil {
		t.Fatalf("tc: %v", err)
	}
	var qs []struct {
		Kind    string
		Options struct {
			Rate  int64 // bytes/s
			Burst int64 // bytes
			Lat   int64 // µs
		}
	}
	if err := json.Unmarshal(out, &qs); err != nil || len(qs) != 1 || qs[0].Kind != "tbf" {
		t.Fatalf("tc -j on %s: %v: %s", dev, err, out)
	}
	o := qs[0].Options
	return o.Rate*o.Lat/1e6 + o.Burst
}
