package client

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"poolfs/internal/chunkstore"
	"poolfs/internal/meta"
)

// A drive refuses a fragment (chunkstore.ErrFull) when its used bytes, the
// fragments being written to it and the new one pass what client writes may
// fill, plus, for a fragment replacing an older generation of itself, a
// quarter of the room kept for rebuilds (storage.Replacing). A stripe
// written over a committed generation needs no room of the pool: once the
// writes in flight before it have committed and the collector has deleted
// the generations they replace, the drive takes it. On small drives the
// write-behind window alone (tens of stripes of 1 MiB fragments) is more
// than that allowance, so `fio --rw=write` into a file it had just
// preallocated (fallocate, then overwrite) failed its final fsync with
// ENOSPC in a pool of 12 drives of 160 MiB at 70% full, as did random
// overwrites of a file at 74%.
//
// So a replacement refused by a full drive is tried again while the
// collector frees room (garbageGate.drain) and, when its queue holds
// nothing yet, after a pause that doubles from fullPause to fullPauseMax,
// for fullWait in all. A write that still finds the drive full fails with
// ErrPoolFull, and later replacements refused by a full drive try once
// more only, until one succeeds (fullStuck): a drive held full by what no
// collector frees (another client's fragments) costs one wait, not one a
// stripe. A write of a new stripe (no old generation) needs room of its
// own and is tried once more only, after drain.
const (
	fullPause    = 50 * time.Millisecond
	fullPauseMax = time.Second
	fullWait     = 30 * time.Second
)

// fullRetry runs write, and again while it fails with chunkstore.ErrFull
// and room may come (above), for at most wait (fullWait) in all; stuck is
// the client's fullStuck.
func fullRetry(ctx context.Context, replacing bool, stuck *atomic.Bool, wait time.Duration, drain func(context.Context) bool,
	write func() (meta.StripeRec, error)) (meta.StripeRec, error) {
	rec, err := write()
	switch {
	case !errors.Is(err, chunkstore.ErrFull):
	case !replacing || stuck.Load():
		if drain(ctx) {
			rec, err = write()
		}
	default:
		deadline, pause := time.Now().Add(wait), fullPause
		for errors.Is(err, chunkstore.ErrFull) {
			if !drain(ctx) {
				if time.Now().Add(pause).After(deadline) {
					stuck.Store(true)
					return rec, err
				}
				if !sleepCtx(ctx, pause) {
					return rec, err
				}
				pause = min(2*pause, fullPauseMax)
			}
			rec, err = write()
		}
	}
	if err == nil && replacing && stuck.Load() {
		stuck.Store(false)
	}
	return rec, err
}
