package client_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"poolfs/internal/client"
	"poolfs/internal/meta"
)

// TestConcurrentSmallWritesWithFolds: several writers of one File (as the
// mount's queue of O_DIRECT writes is) write 4 KiB blocks at random, each
// writer its own blocks, while the budget makes folds run beside them.
// Every extent must keep its log stripe, and the file must read back byte
// for byte.
func TestConcurrentSmallWritesWithFolds(t *testing.T) {
	conn := startWith(t, client.Options{StripesInFlight: 2, DeltaBudget: 256 << 10})
	ctx := context.Background()
	const size = 4 << 20
	f, ref := written(t, conn, "f", size)
	ino := f.Attr().Ino
	const writers, blk = 8, 4 << 10
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1500 {
				b := rand.IntN(size/blk/writers)*writers + w
				p := make([]byte, blk)
				for j := range p {
					p[j] = byte(rand.Uint32())
				}
				if _, err := f.WriteAt(ctx, p, int64(b*blk)); err != nil {
					t.Error(err)
					return
				}
				copy(ref[b*blk:], p) // each writer its own blocks
			}
		}()
	}
	wg.Add(1)
	go func() { // fsyncs and closes of other descriptors flush the File
		defer wg.Done()
		for range 50 {
			if err := f.Flush(ctx); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	wg.Wait()
	if err := f.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	f.WaitFolds()
	deltaStats(t, conn, ino) // fails on an extent without its log stripe
	checkFile(t, fresh(conn), ino, ref, "after concurrent writes and folds")
}

// TestDeltaLogBounded: a writer of small random writes all over a file is
// held back while its delta log is more than twice its budget, so the
// log never holds much more than that (and its space on the drives stays
// bounded), whatever the folds' pace.
func TestDeltaLogBounded(t *testing.T) {
	const budget = 256 << 10
	conn := startWith(t, client.Options{StripesInFlight: 2, DeltaBudget: budget, FoldsInFlight: 1})
	ctx := context.Background()
	const size = 16 << 20
	f, ref := written(t, conn, "f", size)
	ino := f.Attr().Ino
	most := 0
	for i := range 3000 {
		off := rand.IntN(size/4096) * 4096
		p := make([]byte, 4096)
		for j := range p {
			p[j] = byte(rand.Uint32())
		}
		if _, err := f.WriteAt(ctx, p, int64(off)); err != nil {
			t.Fatal(err)
		}
		copy(ref[off:], p)
		if i%50 == 0 {
			most = max(most, deltaBytes(t, conn, ino))
		}
	}
	// Twice the budget, plus one write-back that went over it.
	if bound := 2*budget + 2<<20; most > bound {
		t.Fatalf("the delta log held %d bytes, more than %d (budget %d)", most, bound, budget)
	}
	t.Logf("most delta bytes seen: %d (budget %d)", most, budget)
	// The writer went at the folds' pace, and Held says so.
	if h := conn.Client.Held(); h.Folds.Waits == 0 || h.Folds.Wait <= 0 || h.Garbage != (client.Held{}) {
		t.Fatalf("held %+v: want waits for the folds, none for the collector", h)
	}
	t.Logf("held: %+v", conn.Client.Held())
	if err := f.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	f.WaitFolds()
	checkFile(t, fresh(conn), ino, ref, "after a writer held back by the folds")
}

// deltaBytes is the bytes of the delta extents of file ino.
func deltaBytes(t *testing.T, conn *conn, ino meta.Ino) int {
	t.Helper()
	recs, err := conn.Meta.Stripes(context.Background(), ino, 0, meta.LogStripeBase-1)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range recs {
		for _, d := range r.Deltas {
			n += int(d.Len)
		}
	}
	return n
}

// logBytes is the bytes of the log stripes of file ino: the delta log's
// space, extents since folded or overwritten included.
func logBytes(t *testing.T, conn *conn, ino meta.Ino) int {
	t.Helper()
	recs, err := conn.Meta.Stripes(context.Background(), ino, meta.LogStripeBase, ^uint64(0))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range recs {
		n += int(r.Len)
	}
	return n
}

// TestDeltaLogSpaceBounded: random small writes all over a file keep the
// delta log's space (its log stripes, whose bytes stay as long as one
// extent is in them) near the File's budget: the folds take the stripes
// with extents in the oldest log stripes first, so log stripes go, and a
// writer faster than the folds waits.
func TestDeltaLogSpaceBounded(t *testing.T) {
	const budget = 1 << 20
	conn := startWith(t, client.Options{StripesInFlight: 2, DeltaBudget: budget})
	ctx := context.Background()
	const size = 16 << 20
	f, ref := written(t, conn, "f", size)
	ino := f.Attr().Ino
	most := 0
	for i := range 3000 {
		p := randomPiece(4096)
		off := rand.IntN(size/4096) * 4096
		if _, err := f.WriteAt(ctx, p, int64(off)); err != nil {
			t.Fatal(err)
		}
		copy(ref[off:], p)
		if i%50 == 0 {
			most = max(most, logBytes(t, conn, ino))
		}
	}
	// 9/8 of the budget, plus the write-backs in flight (4 of at most
	// 256 KiB at this window) that went over it.
	if bound := budget*9/8 + 4*256<<10 + 256<<10; most > bound {
		t.Fatalf("the delta log's log stripes held %d bytes, more than %d (budget %d)", most, bound, budget)
	}
	t.Logf("most log stripe bytes seen: %d (budget %d)", most, budget)
	if err := f.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	f.WaitFolds()
	checkFile(t, fresh(conn), ino, ref, "after writes with the log's space bounded")
}

// TestFoldAtWriteBack: a write-back whose bytes, with the extents its
// stripe has, reach the part of the stripe that makes it due for a fold
// writes the stripe as a new generation at once (no extents, no log
// stripe for them): the drives take one stripe, not the log's copy of the
// bytes and then the stripe.
func TestFoldAtWriteBack(t *testing.T) {
	conn := startWith(t, client.Options{StripesInFlight: 2, DeltaBudget: 1 << 40})
	ctx := context.Background()
	const sb = testK * testUnit
	f, ref := written(t, conn, "f", 4*sb)
	ino := f.Attr().Ino
	// 4 KiB of every 8 KiB of the first 80% of stripe 1, from first on.
	write := func(first int) {
		for off := sb + first; off < sb+sb*8/10; off += 8 << 10 {
			p := randomPiece(4 << 10)
			if _, err := f.WriteAt(ctx, p, int64(off)); err != nil {
				t.Fatal(err)
			}
			copy(ref[off:], p)
		}
		if err := f.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		f.WaitFolds()
	}
	write(0) // 40% of the stripe: extents
	ext, logs := deltaStats(t, conn, ino)
	if ext == 0 || logs != 1 {
		t.Fatalf("first write-back: %d extents in %d log stripes, want some in 1", ext, logs)
	}
	before := conn.Drives.BytesWritten()
	write(4 << 10) // as many again: 80% of the stripe with the extents
	if ext, logs := deltaStats(t, conn, ino); ext != 0 || logs != 0 {
		t.Fatalf("second write-back: %d extents in %d log stripes left, want the stripe folded", ext, logs)
	}
	raw := sb * (testK + testM) / testK
	if w := conn.Drives.BytesWritten() - before; w > int64(raw)+int64(testK+testM)*8<<10 {
		t.Fatalf("second write-back wrote %d bytes to the drives, more than the stripe's %d", w, raw)
	}
	checkFile(t, fresh(conn), ino, ref, "after the fold at write-back")
}

// TestFoldForBudgetFreesOldestLogs: when the delta log passes its budget,
// the folds take the stripes with extents in the oldest log stripe, and
// count every log stripe those folds empty (here the later write-back of
// the same stripes): the log is then back under 7/8 of the budget and
// no other stripe is folded. Folding on, as if only the oldest log stripe
// were freed, folded the next region too (and, with a log of many
// regions, the whole file at once: every old generation and the whole
// log on the drives at the same time, waiting for the collector).
func TestFoldForBudgetFreesOldestLogs(t *testing.T) {
	const (
		sb      = testK * testUnit
		regions = 4 // of 4 stripes each: one write-back writes one region
		round   = 4 * 2 * 4096
	)
	// Five write-backs of round bytes pass the budget; the log stripes of
	// the first and the fifth (region 0) are freed by folding region 0.
	conn := startWith(t, client.Options{StripesInFlight: 2, DeltaBudget: 9 * round / 2})
	ctx := context.Background()
	f, ref := written(t, conn, "f", regions*4*sb)
	ino := f.Attr().Ino
	for r := range 5 {
		region := r % regions
		for s := region * 4; s < region*4+4; s++ {
			for _, at := range []int{r * 8192, sb / 2} {
				off := s*sb + at
				p := randomPiece(4096)
				if _, err := f.WriteAt(ctx, p, int64(off)); err != nil {
					t.Fatal(err)
				}
				copy(ref[off:], p)
			}
		}
		if err := f.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		// Log stripe numbers grow with time in steps of 1/16 s (and
		// are random within one): one step between write-backs.
		time.Sleep(time.Second / 16)
	}
	f.WaitFolds()
	recs, err := conn.Meta.Stripes(ctx, ino, 0, meta.LogStripeBase-1)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if folded := r.Stripe < 4; folded != (len(r.Deltas) == 0) {
			t.Errorf("stripe %d has %d extents after the fold for the budget; want the 4 stripes of the oldest log stripe folded, and only those", r.Stripe, len(r.Deltas))
		}
	}
	if n := logBytes(t, conn, ino); n != 3*round {
		t.Errorf("the log stripes hold %d bytes after the fold, want %d (the second to fourth write-backs)", n, 3*round)
	}
	checkFile(t, fresh(conn), ino, ref, "after the fold for the budget")
}
