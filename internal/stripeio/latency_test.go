package stripeio

import (
	"testing"
	"time"

	"poolfs/internal/placement"
)

// TestLatencies: the hedging bound follows the typical drive, not the slow
// one; the slow drive is avoided, but let through once per slowRetry so
// that its recovery is seen, and is no longer avoided once it is fast.
func TestLatencies(t *testing.T) {
	l := NewLatencies(5*time.Millisecond, 4)
	if b := l.Bound(); b != latencyColdBound {
		t.Fatalf("cold bound %v, want %v", b, latencyColdBound)
	}
	const slow = placement.DriveID(5)
	for range 20 {
		for id := range placement.DriveID(6) {
			d := 2 * time.Millisecond
			if id == slow {
				d = 200 * time.Millisecond
			}
			l.Observe(id, d)
		}
	}
	b := l.Bound()
	if b < 5*time.Millisecond || b > 50*time.Millisecond {
		t.Fatalf("bound %v with peers at 2ms and one drive at 200ms, want the floor to 50ms", b)
	}
	now := time.Now()
	if l.Avoid(1, now) {
		t.Fatal("a typical drive is avoided")
	}
	if l.Avoid(slow, now) {
		t.Fatal("the slow drive's first read in slowRetry was not let through")
	}
	if !l.Avoid(slow, now.Add(time.Millisecond)) {
		t.Fatal("the slow drive is not avoided")
	}
	if l.Avoid(slow, now.Add(slowRetry)) {
		t.Fatal("the slow drive was not let through again after slowRetry")
	}
	for range 60 {
		l.Observe(slow, 2*time.Millisecond)
	}
	if l.Avoid(slow, now.Add(slowRetry+time.Millisecond)) {
		t.Fatal("the drive is still avoided after it recovered")
	}
}
