package client

import (
	"context"
	"runtime"
	"sync/atomic"
)

// fileHeld is what a File's dirty stripes hold in the client's spaceGate.
// A File dropped with dirty stripes (its last flush failed) gives it back
// through a cleanup, so the gate never keeps space for bytes nobody will
// write.
type fileHeld struct {
	gate *spaceGate
	pool uint32
	n    atomic.Uint64
}

// holdSpace sets up f's share of the gate (OpenAttr).
func (f *File) holdSpace() {
	f.held = &fileHeld{gate: f.c.space, pool: f.mu.attr.Layout.Pool}
	runtime.AddCleanup(f, func(h *fileHeld) { h.gate.done(h.pool, h.n.Load(), false) }, f.held)
}

// admitLocked reserves the raw bytes that a write of n bytes at off adds
// to the pool beyond what its dirty stripes already hold, before anything
// is buffered: ErrPoolFull if the pool cannot take them (ErrWouldBlock if
// !wait and the gate would have to ask the metadata service). A stripe's
// share is the raw size of the stripe as far as the handle wrote into it,
// less that of the committed stripe it replaces. It returns what each
// touched stripe holds once written; writeLocked stores it in the stripe.
func (f *File) admitLocked(ctx context.Context, n int, off int64, wait bool) (map[uint64]uint64, error) {
	lay := f.mu.attr.Layout
	sb := f.stripeBytes()
	committed := int64(f.mu.attr.Size)
	var need uint64
	var holds map[uint64]uint64
	for pc := range pieces(off, n, sb) {
		end, held := int64(pc.in+pc.n), uint64(0)
		if d := f.mu.dirty[pc.s]; d != nil {
			end, held = max(end, int64(d.end())), d.held
		}
		old := stripeRaw(lay, min(max(committed-int64(pc.s)*sb, 0), sb))
		if target := stripeRaw(lay, end); target > old && target-old > held {
			if holds == nil {
				holds = map[uint64]uint64{}
			}
			holds[pc.s] = target - old
			need += target - old - held
		}
	}
	if need == 0 {
		return nil, nil
	}
	if err := f.c.space.reserve(ctx, lay.Pool, need, wait); err != nil {
		return nil, err
	}
	f.held.n.Add(need)
	return holds, nil
}

// unholdLocked ends what dirty stripe d holds: it was committed (its bytes
// now count as the pool's usage) or dropped.
func (f *File) unholdLocked(d *dirtyStripe, committed bool) {
	if d.held == 0 {
		return
	}
	f.c.space.done(f.held.pool, d.held, committed)
	f.held.n.Add(^(d.held - 1))
	d.held = 0
}
