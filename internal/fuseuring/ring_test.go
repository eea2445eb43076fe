package fuseuring

import (
	"errors"
	"log/slog"
	"syscall"
	"testing"
)

func newTestRing(t *testing.T, entries uint32) *ring {
	t.Helper()
	r, err := newRing(entries)
	if errors.Is(err, syscall.ENOSYS) || errors.Is(err, syscall.EPERM) {
		t.Fatalf("io_uring is not available here (%v): the FUSE transport needs it", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.close)
	return r
}

// TestRingNops submits more no-op entries than the ring holds, in rounds,
// and checks that every one completes exactly once with its user data.
func TestRingNops(t *testing.T) {
	r := newTestRing(t, 8)
	seen := map[uint64]int{}
	const total = 100
	next := uint64(0)
	for next < total || len(seen) < total {
		for next < total {
			id := next
			err := r.publish(func(s *sqe) { s.opcode = opNop; s.userData = id })
			if errors.Is(err, errRingFull) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			next++
		}
		if err := r.enter(true); err != nil {
			t.Fatal(err)
		}
		r.reap(func(c cqe) {
			if c.res != 0 {
				t.Errorf("nop %d: res %d", c.userData, c.res)
			}
			seen[c.userData]++
		})
	}
	for id := uint64(0); id < total; id++ {
		if seen[id] != 1 {
			t.Errorf("nop %d completed %d times", id, seen[id])
		}
	}
}

// TestRingFull: a full submission ring says so instead of overwriting.
func TestRingFull(t *testing.T) {
	r := newTestRing(t, 4)
	for i := 0; i < 4; i++ {
		if err := r.publish(func(s *sqe) { s.opcode = opNop }); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
	}
	if err := r.publish(func(s *sqe) { s.opcode = opNop }); !errors.Is(err, errRingFull) {
		t.Fatalf("fifth entry in a ring of 4: %v, want errRingFull", err)
	}
	if err := r.enter(true); err != nil {
		t.Fatal(err)
	}
	n := 0
	r.reap(func(cqe) { n++ })
	if n == 0 {
		t.Fatal("no completion after a waiting enter")
	}
	if err := r.publish(func(s *sqe) { s.opcode = opNop }); err != nil {
		t.Fatalf("after the kernel took the entries: %v", err)
	}
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }
