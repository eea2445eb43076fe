package chunkstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"poolfs/internal/erasure"
)

// FaultyDrive wraps a Drive and injects faults on command: a failed drive,
// silently corrupted reads, slowness. It is safe for concurrent use.
type FaultyDrive struct {
	d  Drive
	mu struct {
		sync.Mutex
		failed      bool
		corruptFrac float64
		rng         *rand.Rand // nil: no corruption
		extra       time.Duration
	}
}

var _ Drive = (*FaultyDrive)(nil)

// WithFaults wraps d; initially it injects nothing.
func WithFaults(d Drive) *FaultyDrive { return &FaultyDrive{d: d} }

// Fail makes every operation return an error wrapping ErrFailed.
func (f *FaultyDrive) Fail() { f.mu.Lock(); f.mu.failed = true; f.mu.Unlock() }

// Heal undoes Fail. Corruption and slowness stay as set.
func (f *FaultyDrive) Heal() { f.mu.Lock(); f.mu.failed = false; f.mu.Unlock() }

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

// SlowDown adds extra delay to every operation (0 removes it).
func (f *FaultyDrive) SlowDown(extra time.Duration) { f.mu.Lock(); f.mu.extra = extra; f.mu.Unlock() }

// before applies Fail and SlowDown to operation op.
func (f *FaultyDrive) before(ctx context.Context, op string) error {
	f.mu.Lock()
	failed, extra := f.mu.failed, f.mu.extra
	f.mu.Unlock()
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

func (f *FaultyDrive) Stat(ctx context.Context) (Usage, error) {
	if err := f.before(ctx, "stat"); err != nil {
		return Usage{}, err
	}
	return f.d.Stat(ctx)
}
