package client

import (
	"testing"
	"time"

	"poolfs/internal/chunkstore/drivetest"
	"poolfs/internal/placement"
)

// TestSlowDriveProbedBesideRead: a drive this client measures as slow is
// still asked for its fragment once a second, to see whether it recovered,
// but beside the parity read in its place: the stripe is read, byte for
// byte, while that probe is held. The probe used to be one of the k
// fetches, so the read waited for the slow drive until the hedging bound
// (about what a drive a few times slower than the rest takes anyway) and
// longer when the hedge budget was spent, as here.
func TestSlowDriveProbedBesideRead(t *testing.T) {
	f := newStripeFixture(t, 4, 2, Options{})
	const slow = placement.DriveID(1)
	for range 20 {
		for id := range placement.DriveID(6) {
			d := time.Millisecond
			if id == slow {
				d = 200 * time.Millisecond
			}
			f.c.lat.Observe(id, d)
		}
	}
	for f.c.lat.Hedge() { // no hedged read can stand in for a held one
	}
	time.Sleep(time.Second + 100*time.Millisecond) // the slow drive is due a probe
	held := f.drives[slow]
	t.Cleanup(held.Hold(drivetest.OpRead))
	f.readWithin(t, 10*time.Second, "on the probe of the slow drive")
	// The probe goes beside the read, on a goroutine of its own, which a
	// busy machine may start after the read returned.
	for deadline := time.Now().Add(5 * time.Second); held.Reads() == 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if held.Reads() != 1 {
		t.Fatalf("the slow drive was asked %d times, want once (its probe)", held.Reads())
	}
	f.readWithin(t, 10*time.Second, "on the slow drive")
	if held.Reads() != 1 {
		t.Fatalf("the slow drive was asked %d times in a second, want once", held.Reads())
	}
}

// TestNewClientLeavesSlowDriveSoon: a client with no latency history stops
// reading from a drive far slower than the rest after two of its reads
// (the hedged ones, at the cold bound), not after four.
//
// The estimates are times: on a machine whose CPUs are busy (the race
// detector, other tests) the other drives' reads slow down too, and the
// slow drive, whose reads are given up at the hedging bound, can look
// like them for a read or two more. A fresh client is tried up to three
// times; a client that kept reading the slow drive four times or more
// fails every time.
func TestNewClientLeavesSlowDriveSoon(t *testing.T) {
	var asked []int64
	for range 3 {
		f := newStripeFixture(t, 4, 2, Options{})
		slow := f.drives[placement.DriveID(1)]
		slow.SlowDown(time.Second) // context-aware: a hedged read ends when cancelled
		for range 8 {
			f.readWithin(t, 10*time.Second, "on the slow drive")
		}
		// Two reads judge the drive; one more if the second read's
		// observation lands after the next stripe read was planned.
		n := slow.Reads()
		if n <= 3 {
			return
		}
		asked = append(asked, n)
	}
	t.Fatalf("the slow drive was asked %v times in 8 reads of its stripe by three fresh clients, want 2 (3 at most)", asked)
}
