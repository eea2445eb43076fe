package netlab

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLimitRate puts a token bucket of the given rate on both ends of a
// host's link, and a second call replaces it.
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
	}
}
