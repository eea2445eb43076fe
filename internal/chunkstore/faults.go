package chunkstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"poolfs/internal/erasure"
)

// ErrOffline is wrapped by the errors of a drive that is unreachable for
// now (its server restarting, a cable pulled) but not known to be broken:
// a transient condition, unlike ErrFailed. Nothing was done by the failed
// call. The management service marks such a drive down, not failed, and
// declares it failed only if it stays unreachable past its pool's grace.
var ErrOffline = errors.New("chunkstore: drive offline")

// FaultyDrive wraps a Drive and injects faults on command: a failed drive,
// an offline drive, silently corrupted reads, slowness. It is safe for
// concurrent use.
type FaultyDrive struct {
	d  Drive
	mu struct {
		sync.Mutex
		failed      bool
		offline     bool
		corruptFrac float64
		rng         *rand.Rand // nil: no corruption
		corrupted   int64      // reads corrupted so far
		extra       time.Duration
	}
}

var _ Drive = (*FaultyDrive)(nil)

// WithFaults wraps d; initially it injects nothing.
func WithFaults(d Drive) *FaultyDrive { return &FaultyDrive{d: d} }

// Fail makes every operation return an error wrapping ErrFailed.
func (f *FaultyDrive) Fail() { f.mu.Lock(); f.mu.failed = true; f.mu.Unlock() }

// Heal clears every injected fault: it undoes Fail, Offline, CorruptReads
// and SlowDown at once, so the drive behaves as the one it wraps again.
func (f *FaultyDrive) Heal() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mu.failed, f.mu.offline = false, false
	f.mu.corruptFrac, f.mu.rng = 0, nil
	f.mu.extra = 0
}

// Offline makes every operation fail at once with an error wrapping
// ErrOffline, without touching the drive, until Online. Fail takes
// precedence: a failed drive reports ErrFailed even when offline.
func (f *FaultyDrive) Offline() { f.mu.Lock(); f.mu.offline = true; f.mu.Unlock() }

// Online undoes Offline: the drive answers again with everything it held.
func (f *FaultyDrive) Online() { f.mu.Lock(); f.mu.offline = false; f.mu.Unlock() }

// CorruptReads flips one bit in the returned bytes of a fraction of the
// ReadFragment calls that follow (0 stops corruption). Which calls and
// which bits are determined by seed and the order of calls.
func (f *FaultyDrive) CorruptReads(fraction float64, seed int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mu.corruptFrac = fraction
	f.mu.rng = nil
	if fraction > 0 {
		f.mu.rng = rand.New(rand.NewPCG(uint64(seed), 0x636f7272757074))
	}
}

// Corrupted reports how many reads CorruptReads has corrupted so far.
func (f *FaultyDrive) Corrupted() int64 { f.mu.Lock(); defer f.mu.Unlock(); return f.mu.corrupted }

// SlowDown adds extra delay to every operation (0 removes it).
func (f *FaultyDrive) SlowDown(extra time.Duration) { f.mu.Lock(); f.mu.extra = extra; f.mu.Unlock() }

// before applies Fail, Offline and SlowDown to operation op.
func (f *FaultyDrive) before(ctx context.Context, op string) error {
	f.mu.Lock()
	failed, offline, extra := f.mu.failed, f.mu.offline, f.mu.extra
	f.mu.Unlock()
	if offline && !failed {
		return fmt.Errorf("%s: injected fault: %w", op, ErrOffline)
	}
	if extra > 0 {
		if err := (SystemClock{}).Sleep(ctx, extra); err != nil {
			return err
		}
	}
	if failed {
		return fmt.Errorf("%s: injected fault: %w", op, ErrFailed)
	}
	return nil
}

func (f *FaultyDrive) WriteFragment(ctx context.Context, key erasure.FragmentKey, frag []byte) error {
	if err := f.before(ctx, "write fragment "+key.String()); err != nil {
		return err
	}
	return f.d.WriteFragment(ctx, key, frag)
}

func (f *FaultyDrive) ReadFragment(ctx context.Context, key erasure.FragmentKey, off, n int64, dst []byte) ([]byte, error) {
	if err := f.before(ctx, "read fragment "+key.String()); err != nil {
		return nil, err
	}
	b, err := f.d.ReadFragment(ctx, key, off, n, dst)
	if err != nil {
		return b, err
	}
	f.mu.Lock()
	if f.mu.rng != nil && f.mu.rng.Float64() < f.mu.corruptFrac && len(b) > 0 {
		bit := f.mu.rng.IntN(len(b) * 8)
		b[bit/8] ^= 1 << (bit % 8)
		f.mu.corrupted++
	}
	f.mu.Unlock()
	return b, nil
}

func (f *FaultyDrive) DeleteFragment(ctx context.Context, key erasure.FragmentKey) error {
	if err := f.before(ctx, "delete fragment "+key.String()); err != nil {
		return err
	}
	return f.d.DeleteFragment(ctx, key)
}

func (f *FaultyDrive) ListFragments(ctx context.Context, fn func(key erasure.FragmentKey, size int64, mtime time.Time) error) error {
	if err := f.before(ctx, "list fragments"); err != nil {
		return err
	}
	return f.d.ListFragments(ctx, fn)
}

func (f *FaultyDrive) Sync(ctx context.Context) error {
	if err := f.before(ctx, "sync"); err != nil {
		return err
	}
	return f.d.Sync(ctx)
}

func (f *FaultyDrive) Stat(ctx context.Context) (Usage, error) {
	if err := f.before(ctx, "stat"); err != nil {
		return Usage{}, err
	}
	return f.d.Stat(ctx)
}
