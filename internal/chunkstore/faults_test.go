package chunkstore

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"poolfs/internal/erasure"
)

func TestFailHeal(t *testing.T) {
	f := WithFaults(newMemDrive())
	if err := f.WriteFragment(ctx, key(1), make([]byte, Align)); err != nil {
		t.Fatal(err)
	}
	f.Fail()
	if err := f.WriteFragment(ctx, key(2), make([]byte, Align)); !errors.Is(err, ErrFailed) {
		t.Fatalf("write on failed drive: %v", err)
	}
	if _, err := f.ReadFragment(ctx, key(1), 0, -1, nil); !errors.Is(err, ErrFailed) {
		t.Fatalf("read on failed drive: %v", err)
	}
	if _, err := f.Stat(ctx); !errors.Is(err, ErrFailed) {
		t.Fatalf("stat on failed drive: %v", err)
	}
	f.Heal()
	if _, err := f.ReadFragment(ctx, key(1), 0, -1, nil); err != nil {
		t.Fatalf("read after heal: %v", err)
	}
	f.SlowDown(20 * time.Millisecond)
	start := time.Now()
	f.ReadFragment(ctx, key(1), 0, -1, nil)
	if time.Since(start) < 20*time.Millisecond {
		t.Fatal("SlowDown had no effect")
	}
}

func TestOfflineOnline(t *testing.T) {
	f := WithFaults(newMemDrive())
	if err := f.WriteFragment(ctx, key(1), pattern(Align, 3)); err != nil {
		t.Fatal(err)
	}
	f.SlowDown(time.Hour) // an offline drive answers at once, never slowly
	f.Offline()
	ops := map[string]func() error{
		"write":  func() error { return f.WriteFragment(ctx, key(2), make([]byte, Align)) },
		"read":   func() error { _, err := f.ReadFragment(ctx, key(1), 0, -1, nil); return err },
		"delete": func() error { return f.DeleteFragment(ctx, key(1)) },
		"list": func() error {
			return f.ListFragments(ctx, func(erasure.FragmentKey, int64, time.Time) error { return nil })
		},
		"stat": func() error { _, err := f.Stat(ctx); return err },
	}
	for name, op := range ops {
		if err := op(); !errors.Is(err, ErrOffline) || errors.Is(err, ErrFailed) {
			t.Errorf("%s on an offline drive: %v, want ErrOffline and not ErrFailed", name, err)
		}
	}
	f.SlowDown(0)
	f.Fail()
	if _, err := f.Stat(ctx); !errors.Is(err, ErrFailed) {
		t.Errorf("stat on a failed offline drive: %v, want ErrFailed", err)
	}
	f.Heal()
	f.Online()
	got, err := f.ReadFragment(ctx, key(1), 0, -1, nil)
	if err != nil || !bytes.Equal(got, pattern(Align, 3)) {
		t.Fatalf("read after online: %v; the offline drive must keep its data (delete did nothing)", err)
	}
	if err := f.WriteFragment(ctx, key(2), make([]byte, Align)); err != nil {
		t.Fatalf("write after online: %v", err)
	}
}

func TestCorruptReads(t *testing.T) {
	want := pattern(Align, 7)
	run := func(seed int64) []int {
		f := WithFaults(newMemDrive())
		f.WriteFragment(ctx, key(1), want)
		f.CorruptReads(0.25, seed)
		var corrupted []int
		for i := range 2000 {
			got, err := f.ReadFragment(ctx, key(1), 0, -1, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				diff := 0
				for j := range got {
					for x := got[j] ^ want[j]; x != 0; x &= x - 1 {
						diff++
					}
				}
				if diff != 1 {
					t.Fatalf("read %d: %d bits flipped, want 1", i, diff)
				}
				corrupted = append(corrupted, i)
			}
		}
		return corrupted
	}
	a, b, c := run(1), run(1), run(2)
	if frac := float64(len(a)) / 2000; frac < 0.22 || frac > 0.28 {
		t.Fatalf("corrupted fraction %.3f, want 0.25", frac)
	}
	if len(a) != len(b) || a[0] != b[0] || a[len(a)-1] != b[len(b)-1] {
		t.Fatal("same seed, different corruption")
	}
	if len(a) == len(c) && a[0] == c[0] && a[1] == c[1] {
		t.Fatal("different seeds, same corruption")
	}
}

// TestHealClearsEveryFault: heal undoes corruption, slowness and offline as
// well as fail, so a healed drive returns its bytes unchanged at once.
func TestHealClearsEveryFault(t *testing.T) {
	f := WithFaults(newMemDrive())
	want := pattern(Align, 7)
	if err := f.WriteFragment(ctx, key(1), want); err != nil {
		t.Fatal(err)
	}
	f.CorruptReads(1, 1)
	f.SlowDown(time.Hour)
	f.Offline()
	f.Fail()
	f.Heal()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 20 {
			got, err := f.ReadFragment(ctx, key(1), 0, -1, nil)
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("read %d after heal: err %v, bytes equal %v", i, err, bytes.Equal(got, want))
				return
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("reads after heal still wait for the injected delay")
	}
	if n := f.Corrupted(); n != 0 {
		t.Fatalf("%d reads corrupted after heal", n)
	}
}
