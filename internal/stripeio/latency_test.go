package stripeio

import (
	"testing"
	"time"

	"poolfs/internal/placement"
)

// TestLatencies: the hedging bound follows the typical drive, not the slow
// one; the slow drive is avoided, and is due a probe read once per
// slowRetry so that its recovery is seen, and is no longer avoided once it
// is fast.
func TestLatencies(t *testing.T) {
	l := NewLatencies(5*time.Millisecond, 4)
	if b := l.Bound(1); b != latencyColdBound {
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
	b := l.Bound(1)
	if b < 5*time.Millisecond || b > 50*time.Millisecond {
		t.Fatalf("bound %v with peers at 2ms and one drive at 200ms, want the floor to 50ms", b)
	}
	if bs := l.Bound(slow); bs != b {
		t.Fatalf("the slow drive's bound is %v, want the typical drive's %v", bs, b)
	}
	now := time.Now()
	if l.Avoid(1) || l.Probe(1, now.Add(slowRetry)) {
		t.Fatal("a typical drive is avoided or probed")
	}
	if !l.Avoid(slow) {
		t.Fatal("the slow drive is not avoided")
	}
	if l.Probe(slow, now) {
		t.Fatal("the slow drive is probed just after it was read")
	}
	if !l.Probe(slow, now.Add(slowRetry)) {
		t.Fatal("the slow drive is not probed slowRetry after it was read")
	}
	if l.Probe(slow, now.Add(slowRetry+time.Millisecond)) || !l.Avoid(slow) {
		t.Fatal("the slow drive is probed twice in slowRetry, or no longer avoided before its probe answered")
	}
	if !l.Probe(slow, now.Add(2*slowRetry)) {
		t.Fatal("the slow drive is not probed again after slowRetry")
	}
	for range 60 {
		l.Observe(slow, 2*time.Millisecond)
	}
	if l.Avoid(slow) || l.Probe(slow, now.Add(4*slowRetry)) {
		t.Fatal("the drive is still avoided or probed after it recovered")
	}
}

// TestLatenciesJudgeFromSecondSample: a new estimator judges a drive slow
// from its second read, once three peers have two each; one slow read
// among fast ones does not make a drive slow.
func TestLatenciesJudgeFromSecondSample(t *testing.T) {
	l := NewLatencies(time.Millisecond, 2)
	const slow, hiccup = placement.DriveID(5), placement.DriveID(4)
	for round := range 2 {
		for id := range placement.DriveID(6) {
			d := 10 * time.Millisecond
			if id == slow || (id == hiccup && round == 0) {
				d = 250 * time.Millisecond
			}
			l.Observe(id, d)
		}
	}
	if !l.Avoid(slow) {
		t.Fatal("a drive whose two reads took 25 times its peers' is not avoided")
	}
	for id := range placement.DriveID(6) {
		if id != slow && l.Avoid(id) {
			t.Fatalf("drive %v is avoided (its reads: 250ms then 10ms for drive %v, 10ms for the others)", id, hiccup)
		}
	}
}

// TestLatenciesOwnBound: a drive whose reads take longer than the median
// drive's but not long enough to be slow (its reads queue behind others on
// a busy link) is late only after factor × its own high latency; a drive
// without an estimate gets the bound of all.
func TestLatenciesOwnBound(t *testing.T) {
	l := NewLatencies(time.Millisecond, 2)
	const busy = placement.DriveID(5)
	for range 20 {
		for id := range placement.DriveID(6) {
			d := 10 * time.Millisecond
			if id == busy {
				d = 18 * time.Millisecond // under the slow threshold, 2 × 10 ms
			}
			l.Observe(id, d)
		}
	}
	if l.Avoid(busy) {
		t.Fatal("the busy drive counts as slow: the test proves nothing")
	}
	typical, own, unknown := l.Bound(1), l.Bound(busy), l.Bound(99)
	if typical > 25*time.Millisecond || unknown != typical {
		t.Fatalf("bounds %v (typical), %v (no estimate), want about 20ms, the same", typical, unknown)
	}
	if own < 36*time.Millisecond {
		t.Fatalf("the busy drive's bound is %v, want at least 2 × its 18ms", own)
	}
}

// TestLatenciesHedgeBudget: hedgeBurst hedged reads are allowed at once,
// then one per hedgeShare reads observed.
func TestLatenciesHedgeBudget(t *testing.T) {
	l := NewLatencies(time.Millisecond, 2)
	for i := range hedgeBurst {
		if !l.Hedge() {
			t.Fatalf("hedge %d of the first %d refused", i+1, hedgeBurst)
		}
	}
	if l.Hedge() {
		t.Fatal("a hedge beyond the burst allowed before any read")
	}
	for range hedgeShare - 1 {
		l.Observe(1, time.Millisecond)
	}
	if l.Hedge() {
		t.Fatalf("a hedge allowed after %d reads, want one per %d", hedgeShare-1, hedgeShare)
	}
	l.Observe(1, time.Millisecond)
	if !l.Hedge() || l.Hedge() {
		t.Fatalf("want exactly one hedge after %d reads", hedgeShare)
	}
}
