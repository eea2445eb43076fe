package recovery

import (
	"testing"
	"time"
)

func TestGateAdmit(t *testing.T) {
	const svc = 100 * time.Millisecond
	period := GatePeriod(svc, 0.4) // 250 ms
	cases := []struct {
		name string
		d    GateDrive
		now  time.Duration
		ok   bool
		next time.Duration
	}{
		{"idle drive takes two", GateDrive{InFlight: 1}, 10 * period, true, 0},
		{"idle drive, two in flight", GateDrive{InFlight: 2}, 10 * period, false, 0},
		{"busy, slot start", GateDrive{Busy: true, Started: -1}, 10 * period, true, 0},
		{"busy, within the first half-svc", GateDrive{Busy: true, Started: 9 * period}, 10*period + svc/2, true, 0},
		{"busy, past the first half-svc", GateDrive{Busy: true, Started: 9 * period}, 10*period + svc/2 + 1, false, 11 * period},
		{"busy, slot already used", GateDrive{Busy: true, Started: 10 * period}, 10*period + svc/4, false, 11 * period},
		{"busy, one in flight", GateDrive{Busy: true, InFlight: 1}, 10 * period, false, 0},
		{"busy, an I/O holding three slots", GateDrive{Busy: true, Started: 12 * period}, 10 * period, false, 13 * period},
	}
	for _, c := range cases {
		ok, next := GateAdmit(c.d, c.now, svc, 0.4)
		if ok != c.ok || next != c.next {
			t.Errorf("%s: GateAdmit = %v, %v; want %v, %v", c.name, ok, next, c.ok, c.next)
		}
	}
	// No share limit (highest) or no service time yet: the idle rule.
	for _, share := range []float64{0, 1} {
		if ok, _ := GateAdmit(GateDrive{Busy: true, InFlight: 1}, 0, svc, share); !ok {
			t.Errorf("share %g: a busy drive with one rebuild I/O refused a second", share)
		}
	}
}

// TestGateHigherShareIsFaster: on a drive saturated by clients, where
// every rebuild I/O waits for the client I/O ahead of it and so takes two
// service times, each priority's share gets more rebuild I/O than the one
// below, and none more than one I/O per slot. (Before, high's slots of
// svc/0.7 were shorter than such an I/O and every other one was lost: high
// rebuilt at 0.35 I/O per svc, less than medium's 0.4.)
func TestGateHigherShareIsFaster(t *testing.T) {
	const svc = 100 * time.Millisecond
	const span = 1000 * svc
	prev := 0
	for _, share := range []float64{0.1, 0.25, 0.4, 0.7} {
		d := GateDrive{Busy: true, Started: -1}
		n := 0
		for now := time.Duration(0); now < span; {
			ok, next := GateAdmit(d, now, svc, share)
			if !ok {
				now = next
				continue
			}
			n++
			d.Started, d.InFlight = now, 1
			now += 2 * svc // behind one client I/O
			d.Ended, d.InFlight = now, 0
		}
		slots := int(span / GatePeriod(svc, share))
		t.Logf("share %.2f: %d rebuild I/Os in %d slots", share, n, slots)
		if n <= prev || n > slots+1 {
			t.Errorf("share %.2f: %d rebuild I/Os in %d slots; want more than %d (the share below) and at most one per slot", share, n, slots, prev)
		}
		prev = n
	}
}
