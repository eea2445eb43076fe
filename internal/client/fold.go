package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"poolfs/internal/meta"
)

// Folding delta extents into stripes.
//
// The handle that commits delta extents (delta.go) keeps, per stripe, the
// bytes of extents it knows of (its own and those it read with the
// records at writeback), and the log stripes they are in, and folds in
// the background: a stripe whose extents reach foldCover of its bytes or
// foldExtents extents, and, while the File's delta log (its log stripes,
// the bytes of extents folded or overwritten included) exceeds its
// budget (Options.DeltaBudget), the stripes with extents in the oldest
// log stripes, which frees them. A fold reads the stripe with its
// extents, writes the result as a new generation and commits it with
// FoldStripes, a compare-and-set on the generation: the extents it read
// are deleted, and those a writer committed since stay over the new
// generation (they were laid over the folded ones). A writer that
// committed a generation since makes the fold a conflict: its fragments
// are deleted and the extents stay. A crash between the fragments and the
// commit leaves the extents valid and the fragments as garbage for the
// collector (their generation was never committed). At most
// Options.FoldsInFlight stripes are folded at once per client.

// DefaultFoldsInFlight is Options.FoldsInFlight's default.
const DefaultFoldsInFlight = 16

// DefaultDeltaBudget is the least delta bytes a File keeps before it
// folds to stay within its budget (see Options.DeltaBudget).
const DefaultDeltaBudget = 64 << 20

// foldCover is the part of a stripe (numerator over 4) whose delta bytes
// make it folded at once: rewriting the stripe then costs (K+M)/K × 4/3
// drive bytes per delta byte.
const foldCover = 3

// foldExtents is the number of extents of a stripe that make it folded
// at once, bounding what a read of it lays over its generation.
const foldExtents = 4096

// foldState is what a File knows of its delta extents. Guarded by File.mu.
type foldState struct {
	bytes   map[uint64]int64 // delta bytes per stripe
	extents map[uint64]int   // extents per stripe
	running map[uint64]bool  // stripes being folded
	// The log stripes f knows extents in (by number: they grow with
	// time, so the smallest is the oldest), and per stripe the log
	// stripes its extents are in. logBytes is the sum of their lengths:
	// the delta log's bytes, those of extents since overwritten or
	// folded included, as long as one extent keeps a log stripe.
	logs     map[uint64]*logUse
	inLogs   map[uint64][]uint64
	logBytes int64
	// pending is the bytes that the batches in flight pack into log
	// stripes (as far as the File knew at hand-over): on the drives
	// before their commit adds them to logBytes.
	pending int64
	// gone is called with each log stripe that no stripe has extents in
	// any more (its bytes leave the client's log cache).
	gone func(log uint64)
}

// logUse is a log stripe: its length and the stripes with extents in it.
type logUse struct {
	len     int64
	stripes map[uint64]struct{}
}

func (fs *foldState) set(s uint64, bytes int64, extents int) {
	if fs.bytes == nil {
		fs.bytes, fs.extents, fs.running = map[uint64]int64{}, map[uint64]int{}, map[uint64]bool{}
		fs.logs, fs.inLogs = map[uint64]*logUse{}, map[uint64][]uint64{}
	}
	if bytes == 0 {
		delete(fs.bytes, s)
		delete(fs.extents, s)
		fs.setLogs(s, nil)
		return
	}
	fs.bytes[s], fs.extents[s] = bytes, extents
}

// setLogs records that stripe s has extents in the log stripes logs
// (number to length) and in no other: a log stripe no stripe has extents
// in any more is gone (the commit that took its last extent dropped it).
func (fs *foldState) setLogs(s uint64, logs map[uint64]int64) {
	for _, l := range fs.inLogs[s] {
		fs.leave(s, l)
	}
	delete(fs.inLogs, s)
	for l, n := range logs {
		u := fs.logs[l]
		if u == nil {
			u = &logUse{len: n, stripes: map[uint64]struct{}{}}
			fs.logs[l] = u
			fs.logBytes += n
		}
		u.stripes[s] = struct{}{}
		fs.inLogs[s] = append(fs.inLogs[s], l)
	}
}

// leave records that stripe s has no extent in log stripe l any more.
func (fs *foldState) leave(s, l uint64) {
	if u := fs.logs[l]; u != nil {
		delete(u.stripes, s)
		if len(u.stripes) == 0 {
			fs.logBytes -= u.len
			delete(fs.logs, l)
			if fs.gone != nil {
				fs.gone(l)
			}
		}
	}
}

// noteDeltasLocked records the extents stripes todo have after a commit
// of logs (written as commits) over the records cur, and starts the
// folds that makes due.
func (f *File) noteDeltasLocked(todo []uint64, cur map[uint64]meta.StripeRec, logs []*logBuf, commits []meta.StripeCommit) {
	add := map[uint64]int64{}
	n := map[uint64]int{}
	in := map[uint64]map[uint64]int64{}
	use := func(s, log uint64, l int64) {
		if in[s] == nil {
			in[s] = map[uint64]int64{}
		}
		in[s][log] = l
	}
	for i, lb := range logs {
		for _, d := range lb.deltas {
			add[d.Stripe] += int64(d.Len)
			n[d.Stripe]++
			use(d.Stripe, commits[i].Rec.Stripe, int64(lb.n))
		}
	}
	for _, s := range todo {
		sum := cur[s].DeltaSum()
		b, k := add[s]+sum.Bytes, n[s]+sum.Extents
		for _, l := range sum.Logs {
			use(s, l.Log, int64(l.Len))
		}
		f.mu.fold.set(s, b, k)
		f.mu.fold.setLogs(s, in[s])
	}
	f.scheduleFoldsLocked()
}

// budgetLocked is the most bytes the File's delta log keeps
// (Options.DeltaBudget), and at most half the room that the log and the
// pool's free space make together, less foldRoom stripes: a pool filling
// up folds the log more often rather than let it take the room other
// writes need (the log is space that folds give back; a pool without room
// for log stripes makes small writes rewrite whole stripes, writeBatch).
// Each fold writes a stripe's new generation beside the old one until the
// collector deletes it, so the folds in flight need room beside the log:
// in a pool of 12 drives of 160 MiB at 74% full, the log with its folds
// filled drives to their write limits, and random overwrites failed with
// ENOSPC (bench/nearfull.sh). A budget whose pool share is under one
// stripe turns the log off (logOKLocked): small writes merge whole
// stripes, which replace generations of the same size.
func (f *File) budgetLocked() int64 {
	b := f.c.opts.DeltaBudget
	if b <= 0 {
		b = max(DefaultDeltaBudget, f.mu.size*deltaBudgetShare/16)
	}
	if r, ok := f.roomLocked(); ok {
		b = min(b, r)
	}
	return b
}

// roomLocked is the pool's share of the budget (budgetLocked), if the
// pool's usage is known.
func (f *File) roomLocked() (int64, bool) {
	lay := f.mu.attr.Layout
	free, ok := f.c.space.free(lay.Pool)
	if !ok || lay.K <= 0 {
		return 0, false
	}
	// free is raw bytes; the budget counts user bytes.
	user := int64(free / uint64(lay.K+lay.M) * uint64(lay.K))
	return (f.mu.fold.logBytes+user)/2 - int64(min(f.c.opts.FoldsInFlight, foldRoom))*f.stripeBytes(), true
}

// foldRoom is how many stripes of the pool's room the budget leaves to the
// folds in flight. More folds than that may run; one that finds a drive
// full waits for the collector (full_retry.go). Leaving room for all 16
// turned the log off in the pool above, and random 64 KiB overwrites went
// at 5.7 MB/s, merging whole stripes (a variant not kept); with 4, at 35–87 MB/s, and none
// failed (bench/nearfull.sh).
const foldRoom = 4

// logOKLocked reports whether small writes may go to the delta log: the
// pool's share of its budget holds a stripe at least.
func (f *File) logOKLocked() bool {
	r, ok := f.roomLocked()
	return !ok || r >= f.stripeBytes()
}

// deltaBudgetShare is the default delta budget's share of the file's
// size, in sixteenths. At 9/16 the log at its cap (9/8 of the budget)
// holds at most 81/128 of the file's size (docs/small-writes.md,
// "Space"). Random writes all over a file fold each region of stripes
// about once per turn of the log, when its stripes' extents hold more
// than budget/size of them. (At 8/16, random 64 KiB writes cost 3.3–3.5
// drive bytes per user byte, at the 3.5 of the target; at 9/16, 3.1,
// with the cluster directory's peak 0.3 GiB higher: the garbage limit,
// garbage.go, had made that room.)
const deltaBudgetShare = 9

// scheduleFoldsLocked starts the folds that are due: the stripes whose
// extents cover foldCover of them or number foldExtents; and, while the
// delta log's bytes pass the budget, the stripes with extents in its
// oldest log stripes, down to 7/8 of the budget (a log stripe goes once
// no extent is in it, so the log is a ring, and its space is bounded).
func (f *File) scheduleFoldsLocked() {
	fs := &f.mu.fold
	sb := f.stripeBytes()
	due := map[uint64]bool{}
	for s, b := range fs.bytes {
		if !fs.running[s] && (4*b >= foldCover*sb || fs.extents[s] >= foldExtents) {
			due[s] = true
		}
	}
	if budget := f.budgetLocked(); fs.logBytes > budget {
		f.dueForBudgetLocked(due, budget)
	}
	for s := range due {
		if !f.c.startBg() {
			return // the client is closing (Close)
		}
		fs.running[s] = true
		go f.foldInBackground(s)
	}
}

// dueForBudgetLocked adds to due the stripes with extents in the oldest
// log stripes, oldest first, until what the log keeps once the folds due
// and running end is at most 7/8 of budget. A log stripe is freed once
// every stripe with extents in it is folded, and the stripes of the
// oldest one have extents in later ones too (a write-back packs its
// stripes in order, so the log stripes of every write-back that touched
// the same stripes go with them): each choice counts every log stripe it
// frees. (Counting only the one chosen, the folds went on to the next
// oldest until the whole file was folded at once, and the log and the
// old generations of every stripe went to the collector together.)
func (f *File) dueForBudgetLocked(due map[uint64]bool, budget int64) {
	fs := &f.mu.fold
	folding := func(s uint64) bool { return due[s] || fs.running[s] }
	order := make([]uint64, 0, len(fs.logs))
	for l := range fs.logs {
		order = append(order, l)
	}
	slices.Sort(order)
	left := fs.logBytes // what is left once the folds due and running end
	gone := map[uint64]bool{}
	// count takes the log stripes of logs that the folds free off left.
	count := func(logs []uint64) {
		for _, l := range logs {
			u := fs.logs[l]
			if gone[l] || u == nil {
				continue
			}
			freed := true
			for s := range u.stripes {
				if !folding(s) {
					freed = false
					break
				}
			}
			if freed {
				gone[l] = true
				left -= u.len
			}
		}
	}
	count(order)
	for _, l := range order {
		if left <= budget*7/8 {
			return
		}
		if gone[l] {
			continue
		}
		var touched []uint64
		for s := range fs.logs[l].stripes {
			if !folding(s) && fs.bytes[s] > 0 {
				due[s] = true
				touched = append(touched, fs.inLogs[s]...)
			}
		}
		count(touched)
	}
}

// foldInBackground folds stripe s (a slot of the client's folds first).
// An error leaves the extents as they are; the stripe is tried again
// when a later writeback notes its extents.
func (f *File) foldInBackground(s uint64) {
	defer f.c.bgRun.Done()
	f.c.folds <- struct{}{}
	f.mu.Lock()
	lay, ino := f.mu.attr.Layout, f.mu.attr.Ino
	f.mu.Unlock()
	gen, folded, err := f.c.fold(f.c.bg, lay, ino, s, f.name)
	<-f.c.folds
	if err != nil && !errors.Is(err, meta.ErrConflict) && !errors.Is(err, meta.ErrNotFound) && f.c.bg.Err() == nil {
		f.c.log.Warn("fold delta extents", "file", f.name, "stripe", s, "err", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.mu.fold.running, s)
	if err == nil {
		f.foldedLocked(s, gen, folded)
	}
	f.wb.idle.Broadcast() // WaitFolds, and writers held back (foldBackpressureLocked)
}

// foldBackpressureLocked holds a writer back while the File's delta log,
// the log stripes of the batches in flight included, is more than an
// eighth over its budget and folds are running: a writer faster than the
// folds (random writes all over a large file) then goes at their pace, so
// that the log, and the space it takes on the drives, stays bounded.
// Only writes that wrote back call it (never a TryWriteAtFor); f.mu is
// released while it waits.
func (f *File) foldBackpressureLocked() {
	fs := &f.mu.fold
	var start time.Time
	for fs.logBytes+fs.pending > f.budgetLocked()*9/8 && len(fs.running) > 0 {
		if start.IsZero() {
			start = time.Now()
		}
		f.wb.idle.Wait()
	}
	if !start.IsZero() {
		f.c.heldFolds.add(start)
	}
}

// foldedLocked forgets what f knew of stripe s after a fold committed
// generation gen (0: the stripe had no extents: f forgets all) over the
// extents folded:
// those committed since the fold read the stripe stay (FoldStripes), so
// f keeps what it knows beyond the folded ones, and the log stripes they
// may be in.
func (f *File) foldedLocked(s, gen uint64, folded []meta.Delta) {
	fs := &f.mu.fold
	b, n := fs.bytes[s], fs.extents[s]
	for _, d := range folded {
		b -= int64(d.Len)
		n--
	}
	if gen != 0 && b > 0 && n > 0 {
		// The extents committed since are in other log stripes than
		// the folded ones (a log stripe's extents commit together).
		fs.bytes[s], fs.extents[s] = b, n
		gone := map[uint64]bool{}
		for _, d := range folded {
			gone[d.Log] = true
		}
		fs.inLogs[s] = slices.DeleteFunc(fs.inLogs[s], func(l uint64) bool {
			if gone[l] {
				fs.leave(s, l)
			}
			return gone[l]
		})
	} else {
		fs.set(s, 0, 0)
	}
	if gen == 0 {
		return
	}
	delete(f.mu.recs, s)
	f.mu.cache.drop(s)
	if _, ok := f.mu.gens[s]; ok {
		f.mu.gens[s] = gen
	}
}

// WaitFolds waits until no fold of f runs.
func (f *File) WaitFolds() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for len(f.mu.fold.running) > 0 {
		f.wb.idle.Wait()
	}
}

// FoldAll folds every committed stripe of f that has delta extents, now
// and in the calling goroutine (tests and tools; writes fold by
// themselves in the background). Buffered writes are not flushed.
func (f *File) FoldAll(ctx context.Context) error {
	f.WaitFolds()
	f.mu.Lock()
	lay, ino, size := f.mu.attr.Layout, f.mu.attr.Ino, int64(f.mu.attr.Size)
	f.mu.Unlock()
	if size == 0 {
		return nil
	}
	sb := StripeBytes(lay)
	recs, err := f.c.meta.Stripes(ctx, ino, 0, uint64((size-1)/sb))
	if err != nil {
		return err
	}
	for _, r := range recs {
		if len(r.Deltas) == 0 {
			continue
		}
		gen, folded, err := f.c.fold(ctx, lay, ino, r.Stripe, f.name)
		if err != nil {
			return err
		}
		f.mu.Lock()
		f.foldedLocked(r.Stripe, gen, folded)
		f.mu.Unlock()
	}
	return nil
}

// fold writes stripe s of file ino with its delta extents as a new
// generation and commits it with FoldStripes, returning the generation
// (0 if the stripe has no extents) and the extents folded (those
// committed meanwhile stay, over the new generation). On a failed commit
// the new fragments are deleted (best effort).
func (c *Client) fold(ctx context.Context, lay meta.Layout, ino meta.Ino, s uint64, name string) (uint64, []meta.Delta, error) {
	ctx = patient(ctx)
	recs, err := c.meta.Stripes(ctx, ino, s, s)
	if err != nil || len(recs) == 0 || len(recs[0].Deltas) == 0 {
		return 0, nil, err
	}
	rec := recs[0]
	pool := c.bufs.get(lay.K+lay.M, int(lay.Unit))
	b := pool.get()
	defer pool.put(b)
	shards, err := c.readFold(ctx, lay, ino, rec, b, name)
	if err != nil {
		return 0, nil, fmt.Errorf("fold stripe %d of %s: %w", s, name, err)
	}
	if !inFullUnits(b, shards, lay.K) {
		flat := make([]byte, rec.Len)
		joinInto(flat, shards, int(rec.Len))
		fillShards(b, flat, int(rec.Len), lay.K, int(lay.Unit))
	}
	nrec, err := c.writeStripe(ctx, lay, ino, s, rec.Gen, b, int(rec.Len))
	if err != nil {
		return 0, nil, fmt.Errorf("fold stripe %d of %s: %w", s, name, err)
	}
	if c.foldWritten != nil && !c.foldWritten(nrec) {
		return 0, nil, fmt.Errorf("fold stripe %d of %s: stopped before the commit", s, name)
	}
	err = c.meta.FoldStripes(ctx, ino, []meta.StripeCommit{{Rec: nrec, OldGen: rec.Gen, Deltas: maxDeltaSeq(rec)}})
	if err != nil {
		if m, merr := c.Map(ctx); merr == nil {
			c.deleteFragments(m, ino, nrec, make([]error, len(nrec.Drives)))
		}
		return 0, nil, fmt.Errorf("fold stripe %d of %s: %w", s, name, err)
	}
	return nrec.Gen, rec.Deltas, nil
}

// inFullUnits reports whether the k data shards read into b are b's own
// full-unit shards (a stripe of whole units read in place): then they are
// already laid out as writeStripe takes them, and need no copy.
func inFullUnits(b *stripeBuf, shards [][]byte, k int) bool {
	if len(shards) < k {
		return false
	}
	for i := 0; i < k; i++ {
		sh := b.shard(i, b.unit)
		if len(shards[i]) != len(sh) || &shards[i][0] != &sh[0] {
			return false
		}
	}
	return true
}
