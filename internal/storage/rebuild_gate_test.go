package storage

import (
	"context"
	"math"
	"testing"
	"time"

	"poolfs/internal/chunkstore"
	"poolfs/internal/placement"
	"poolfs/internal/recovery"
)

// tryAcquire asks the gate for one rebuild I/O on drive id, giving up after
// d; it reports whether the I/O was admitted, and the caller then ends it
// with the returned function.
func tryAcquire(t *testing.T, g *ioGate, id placement.DriveID, share float64, d time.Duration) (func(), bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	done, err := g.acquire(ctx, id, share)
	if err != nil {
		return nil, false
	}
	return done, true
}

func TestGateIdleDriveTakesDepth(t *testing.T) {
	for _, share := range []float64{0.1, 0.5, 1} {
		var g ioGate
		var held []func()
		for range recovery.GateIdleDepth {
			done, ok := tryAcquire(t, &g, 1, share, time.Second)
			if !ok {
				t.Fatalf("share %g: an idle drive refused rebuild I/O %d", share, len(held)+1)
			}
			held = append(held, done)
		}
		if _, ok := tryAcquire(t, &g, 1, share, 30*time.Millisecond); ok {
			t.Fatalf("share %g: %d rebuild I/Os admitted at once, want %d", share, recovery.GateIdleDepth+1, recovery.GateIdleDepth)
		}
		if _, ok := tryAcquire(t, &g, 2, share, time.Second); !ok {
			t.Fatalf("share %g: another drive is held up by drive 1", share)
		}
		held[0]()
		if done, ok := tryAcquire(t, &g, 1, share, time.Second); !ok {
			t.Fatalf("share %g: a slot freed, yet the next rebuild I/O waits", share)
		} else {
			done()
		}
		held[1]()
	}
}

// warm runs one rebuild I/O of duration d on an idle drive, so the gate
// knows the drives' service time.
func warm(t *testing.T, g *ioGate, d time.Duration) {
	t.Helper()
	done, ok := tryAcquire(t, g, 99, 1, time.Second)
	if !ok {
		t.Fatal("an idle drive refused rebuild I/O")
	}
	time.Sleep(d)
	done()
}

func TestGateBusyDriveShare(t *testing.T) {
	var g ioGate
	const svc, share = 100 * time.Millisecond, 0.5 // period 200 ms
	warm(t, &g, svc)
	var ends []func()
	for id := range placement.DriveID(4) {
		ends = append(ends, g.client(id)) // a client I/O in flight: busy
	}
	defer func() {
		for _, end := range ends {
			end()
		}
	}()
	// Four busy drives: each starts one rebuild I/O in the same slot.
	starts := make(chan time.Time, 4)
	dones := make(chan func(), 4)
	for id := range placement.DriveID(4) {
		go func() {
			done, err := g.acquire(t.Context(), id, share)
			if err != nil {
				t.Error(err)
				return
			}
			starts <- time.Now()
			dones <- done
		}()
	}
	var first, last time.Time
	for range 4 {
		at := <-starts
		if first.IsZero() || at.Before(first) {
			first = at
		}
		if at.After(last) {
			last = at
		}
	}
	if spread := last.Sub(first); spread > svc {
		t.Errorf("busy drives started their rebuild I/O %v apart, want them in one slot", spread)
	}
	if _, ok := tryAcquire(t, &g, 0, share, 50*time.Millisecond); ok {
		t.Fatal("a busy drive admitted two rebuild I/Os at once")
	}
	time.Sleep(svc)
	for range 4 {
		(<-dones)()
	}
	// The next one on drive 0 waits for the next slot: about a period
	// after the first, of which rebuild took half.
	done, ok := tryAcquire(t, &g, 0, share, 5*time.Second)
	if !ok {
		t.Fatal("the next rebuild I/O never started")
	}
	done()
	if gap := time.Since(first); gap < 2*svc*3/4 {
		t.Fatalf("two rebuild I/Os on a busy drive %v apart, want about %v (share %g)", gap, 2*svc, share)
	}
	// At the highest priority (share 1) clients do not slow rebuild.
	var held []func()
	for range recovery.GateIdleDepth {
		done, ok := tryAcquire(t, &g, 1, 1, time.Second)
		if !ok {
			t.Fatal("share 1: a busy drive held rebuild back")
		}
		held = append(held, done)
	}
	for _, done := range held {
		done()
	}
}

func TestGateDriveBecomesIdle(t *testing.T) {
	var g ioGate
	warm(t, &g, 20*time.Millisecond)
	g.client(1)() // one client I/O, ended now
	// Busy at share 0.1: one rebuild I/O per 200 ms; but no client I/O
	// comes, and after 4 rebuild I/O times (80 ms) the drive is idle.
	var held []func()
	start := time.Now()
	for range recovery.GateIdleDepth {
		done, ok := tryAcquire(t, &g, 1, 0.1, 5*time.Second)
		if !ok {
			t.Fatal("rebuild never resumed on a drive clients left")
		}
		held = append(held, done)
	}
	if waited := time.Since(start); waited > 190*time.Millisecond {
		t.Fatalf("rebuild took %v to fill an idle drive, want about 80 ms", waited)
	}
	for _, done := range held {
		done()
	}
}

func TestGateCancel(t *testing.T) {
	var g ioGate
	for range recovery.GateIdleDepth {
		done, _ := tryAcquire(t, &g, 1, 0.5, time.Second)
		defer done()
	}
	ctx, cancel := context.WithCancel(t.Context())
	go func() { time.Sleep(10 * time.Millisecond); cancel() }()
	if _, err := g.acquire(ctx, 1, 0.5); err != context.Canceled {
		t.Fatalf("acquire on a full drive after cancel: %v, want context.Canceled", err)
	}
}

func TestReconstructArgsShare(t *testing.T) {
	tests := []struct {
		share float64
		ok    bool
	}{{0, true}, {0.4, true}, {1, true}, {-0.1, false}, {1.5, false}, {math.NaN(), false}, {math.Inf(1), false}}
	for _, tt := range tests {
		a := ReconstructArgs{K: 2, M: 1, StripeLen: 8192, ShardSize: 4096, Share: tt.share,
			Sources: []FragmentAt{{0, 0}, {1, 1}}, Targets: []FragmentAt{{2, 2}}}
		if err := a.validate(); (err == nil) != tt.ok {
			t.Errorf("share %g: validate = %v, want ok %v", tt.share, err, tt.ok)
		}
	}
}

// blockingSync is a drive whose Sync waits until out is closed.
type blockingSync struct {
	chunkstore.Drive
	in, out chan struct{}
}

func (b blockingSync) Sync(ctx context.Context) error {
	b.in <- struct{}{}
	<-b.out
	return nil
}

// TestGateSyncIsClientIO: a client's sync of a drive served in process
// holds the drive like a read or a write, so the rebuild gate counts it:
// before, rebuild I/O admitted during a flush queued behind it and the
// gate took that wait for the drive's service time.
func TestGateSyncIsClientIO(t *testing.T) {
	s := &Server{}
	b := blockingSync{Drive: chunkstore.NewMemDrive("d1", 1<<20), in: make(chan struct{}), out: make(chan struct{})}
	g := gatedDrive{Drive: b, id: 1, s: s}
	errc := make(chan error, 1)
	go func() { errc <- g.Sync(t.Context()) }()
	<-b.in
	s.gate.mu.Lock()
	n := s.gate.driveLocked(1).client
	s.gate.mu.Unlock()
	close(b.out)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("%d client I/Os in flight during a sync, want 1", n)
	}
}
