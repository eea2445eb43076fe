package client_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"strings"
	"testing"

	"poolfs/internal/client"
	"poolfs/internal/erasure"
	"poolfs/internal/meta"
	"poolfs/internal/placement"
)

// fresh returns a new client over c's store and drives: a second
// machine, with nothing cached.
func fresh(c *conn) *conn {
	n := *c
	n.Client = client.New(c.Meta, c.Maps, c.Drives, client.Options{})
	return &n
}

// checkFile reads the whole file ino through a new handle of conn and
// compares it with want byte for byte.
func checkFile(t *testing.T, conn *conn, ino meta.Ino, want []byte, what string) {
	t.Helper()
	f, err := conn.Client.Open(context.Background(), ino, "f")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got := f.Attr().Size; got != uint64(len(want)) {
		t.Fatalf("%s: size %d, want %d", what, got, len(want))
	}
	// Random reads (ranged, with extents laid over them) and a
	// sequential pass (whole stripes through the cache).
	for range 200 {
		off := rand.IntN(len(want))
		n := min(1+rand.IntN(100<<10), len(want)-off)
		got := make([]byte, n)
		if _, err := f.ReadAt(context.Background(), got, int64(off)); err != nil {
			t.Fatalf("%s: read %d at %d: %v", what, n, off, err)
		}
		if i := firstDiff(got, want[off:off+n]); i >= 0 {
			t.Fatalf("%s: read %d at %d differs at byte %d", what, n, off, off+i)
		}
	}
	got, err := readSeq(f, 0, int64(len(want)), 1<<20)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if i := firstDiff(got, want); i >= 0 {
		t.Fatalf("%s: sequential read differs at byte %d", what, i)
	}
}

func firstDiff(a, b []byte) int {
	if bytes.Equal(a, b) {
		return -1
	}
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// deltaStats counts the extents and log stripes of file ino.
func deltaStats(t *testing.T, conn *conn, ino meta.Ino) (extents, logs int) {
	t.Helper()
	recs, err := conn.Meta.Stripes(context.Background(), ino, 0, ^uint64(0))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		extents += len(r.Deltas)
		if meta.IsLogStripe(r.Stripe) {
			logs++
		}
	}
	return extents, logs
}

// randomWrites writes n random pieces of up to maxLen bytes at random
// offsets of the first len(ref) bytes of f, into ref too, with reads of
// random ranges in between checked against ref.
func randomWrites(t *testing.T, f *client.File, ref []byte, n, maxLen int) {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		l := 1 + rand.IntN(maxLen)
		off := rand.IntN(len(ref) - l)
		p := make([]byte, l)
		for j := range p {
			p[j] = byte(rand.Uint32())
		}
		if _, err := f.WriteAt(ctx, p, int64(off)); err != nil {
			t.Fatal(err)
		}
		copy(ref[off:], p)
		if i%7 == 0 {
			ro := rand.IntN(len(ref) - 1)
			got := make([]byte, min(1+rand.IntN(300<<10), len(ref)-ro))
			if _, err := f.ReadAt(ctx, got, int64(ro)); err != nil {
				t.Fatal(err)
			}
			if d := firstDiff(got, ref[ro:ro+len(got)]); d >= 0 {
				t.Fatalf("write %d: read %d at %d differs at byte %d", i, len(got), ro, ro+d)
			}
		}
		if i%50 == 49 {
			if err := f.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := f.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestRandomWritesAgainstReference: small random writes over a written
// file, far beyond the write-behind window, are committed as delta
// extents (no stripe is rewritten for them), and the file reads as a
// reference copy with the same writes applied, byte for byte: through
// the writer's handle while it writes, through a fresh client, after
// the folds the writes caused, and after folding everything; with the
// writer's log cache, whose folds and reads take the log's bytes from
// memory, and without, whose read them from the drives.
func TestRandomWritesAgainstReference(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cache int64
	}{{"log cache", 0}, {"no log cache", -1}} {
		t.Run(tc.name, func(t *testing.T) { randomWritesAgainstReference(t, tc.cache) })
	}
}

func randomWritesAgainstReference(t *testing.T, logCache int64) {
	// A small window: a writeback every few writes. A small budget:
	// folds while writing.
	conn := startWith(t, client.Options{StripesInFlight: 2, DeltaBudget: 4 << 20, LogCache: logCache})
	ctx := context.Background()
	const size = 8<<20 + 12345 // 33 stripes, the last one short
	f, ref := written(t, conn, "f", size)
	ino := f.Attr().Ino
	gensBefore := stripeGens(t, conn, ino)

	randomWrites(t, f, ref, 150, 20<<10)
	ext, logs := deltaStats(t, conn, ino)
	if ext == 0 || logs == 0 {
		t.Fatalf("random writes left %d extents in %d log stripes: not written as deltas", ext, logs)
	}
	if rewritten := changedGens(gensBefore, stripeGens(t, conn, ino)); rewritten > len(gensBefore)/2 {
		t.Fatalf("%d of %d stripes rewritten by 150 small writes (folds only expected)", rewritten, len(gensBefore))
	}
	checkFile(t, fresh(conn), ino, ref, "fresh client")

	// Many more, so that the budget makes folds run.
	randomWrites(t, f, ref, 600, 40<<10)
	f.WaitFolds()
	checkFile(t, fresh(conn), ino, ref, "after background folds")
	if ext, _ := deltaStats(t, conn, ino); ext*int(20<<10) > 16<<20 {
		t.Errorf("%d extents left: the budget of 4 MiB does not fold", ext)
	}

	g := reopen(t, conn, f)
	if err := g.FoldAll(ctx); err != nil {
		t.Fatal(err)
	}
	if ext, logs := deltaStats(t, conn, ino); ext != 0 || logs != 0 {
		t.Fatalf("after FoldAll: %d extents, %d log stripes", ext, logs)
	}
	checkFile(t, fresh(conn), ino, ref, "after folding all")
}

func stripeGens(t *testing.T, conn *conn, ino meta.Ino) map[uint64]uint64 {
	t.Helper()
	recs, err := conn.Meta.Stripes(context.Background(), ino, 0, meta.LogStripeBase-1)
	if err != nil {
		t.Fatal(err)
	}
	out := map[uint64]uint64{}
	for _, r := range recs {
		out[r.Stripe] = r.Gen
	}
	return out
}

func changedGens(a, b map[uint64]uint64) int {
	n := 0
	for s, g := range a {
		if b[s] != g {
			n++
		}
	}
	return n
}

// TestFoldCrash: a fold stopped between writing its fragments and its
// commit (as a crash would stop it) leaves the delta extents in force and
// the file byte for byte as written; its fragments are orphans that the
// collector's orphan scan removes without touching the live log stripes,
// and a later fold completes.
func TestFoldCrash(t *testing.T) {
	conn := startWith(t, client.Options{StripesInFlight: 2, DeltaBudget: 1 << 40})
	ctx := context.Background()
	f, ref := written(t, conn, "f", 2<<20)
	ino := f.Attr().Ino
	randomWrites(t, f, ref, 40, 8<<10)
	ext, logs := deltaStats(t, conn, ino)
	if ext == 0 {
		t.Fatal("no extents to fold")
	}
	var stopped []meta.StripeRec
	client.SetFoldWritten(conn.Client, func(rec meta.StripeRec) bool {
		stopped = append(stopped, rec)
		return false
	})
	err := f.FoldAll(ctx)
	if err == nil || !strings.Contains(err.Error(), "stopped before the commit") || len(stopped) != 1 {
		t.Fatalf("fold with a crash before the commit: %v (%d stopped)", err, len(stopped))
	}
	if g := stripeGens(t, conn, ino)[stopped[0].Stripe]; g == stopped[0].Gen {
		t.Fatalf("stopped fold committed generation %x", g)
	}
	if e, l := deltaStats(t, conn, ino); e != ext || l != logs {
		t.Fatalf("after the stopped fold: %d extents in %d logs, want %d in %d", e, l, ext, logs)
	}
	checkFile(t, fresh(conn), ino, ref, "after a stopped fold")

	// Its fragments are on the drives and name a generation that is not
	// committed: what the collector's orphan scan removes.
	nrec := stopped[0]
	for i, id := range nrec.Drives {
		key := erasure.FragmentKey{Ino: uint64(ino), Stripe: nrec.Stripe, Gen: nrec.Gen, Index: uint8(i)}
		if conn.Drives[placement.DriveID(id)].Fragment(key) == nil {
			t.Fatalf("fragment %v of the stopped fold not on drive %d", key, id)
		}
	}
	if ok, err := conn.Meta.Committed(ctx, ino, nrec.Stripe, nrec.Gen); err != nil || ok {
		t.Fatalf("stopped fold's generation committed: %v %v", ok, err)
	}

	client.SetFoldWritten(conn.Client, nil)
	if err := f.FoldAll(ctx); err != nil {
		t.Fatal(err)
	}
	if e, l := deltaStats(t, conn, ino); e != 0 || l != 0 {
		t.Fatalf("after the fold: %d extents in %d logs", e, l)
	}
	checkFile(t, fresh(conn), ino, ref, "after the fold")
	// The old generation and the log stripes are in the collector's queue.
	gc, err := conn.Meta.GCList(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	queued := 0
	for _, g := range gc {
		if meta.IsLogStripe(g.Stripe) {
			queued++
		}
	}
	if queued != logs {
		t.Fatalf("%d log stripes queued for the collector, want %d", queued, logs)
	}
}

// TestSmallWritesAmplification: small random writes over a written file
// cost the drives a few bytes per byte written (the log, mirrored for
// small write-backs, and the folds of stripes that filled up), not a
// whole stripe per write-back as read-modify-write does (about 40 bytes
// per byte here: five 256 KiB stripes rewritten at 4+2 per write-back of
// five 4-16 KiB writes).
func TestSmallWritesAmplification(t *testing.T) {
	conn := startWith(t, client.Options{StripesInFlight: 2})
	f, ref := written(t, conn, "f", 8<<20)
	before := conn.Drives.BytesWritten()
	user := 0
	for range 200 {
		p := make([]byte, 4<<10+rand.IntN(12<<10))
		off := rand.IntN(len(ref) - len(p))
		if _, err := f.WriteAt(context.Background(), p, int64(off)); err != nil {
			t.Fatal(err)
		}
		copy(ref[off:], p)
		user += len(p)
	}
	if err := f.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.WaitFolds()
	amp := float64(conn.Drives.BytesWritten()-before) / float64(user)
	t.Logf("%.2f bytes written to the drives per byte written", amp)
	if amp > 5 {
		t.Fatalf("%.1f bytes written to the drives per byte written", amp)
	}
	checkFile(t, fresh(conn), f.Attr().Ino, ref, "after small writes")
}

// TestFoldKeepsLaterExtents: extents committed while a fold of their
// stripe is being written (a write-back of the same stripe between the
// fold's read and its commit) do not make the fold fail: the fold
// commits, the extents it read go, the later one stays over the new
// generation, and the file reads byte for byte as written.
func TestFoldKeepsLaterExtents(t *testing.T) {
	conn := startWith(t, client.Options{StripesInFlight: 2, DeltaBudget: 1 << 40})
	ctx := context.Background()
	f, ref := written(t, conn, "f", 1<<20)
	ino := f.Attr().Ino
	for i := range 4 {
		p := randomPiece(4 << 10)
		off := 8<<10 + i*16<<10
		if _, err := f.WriteAt(ctx, p, int64(off)); err != nil {
			t.Fatal(err)
		}
		copy(ref[off:], p)
	}
	if err := f.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	other, err := fresh(conn).Client.Open(ctx, ino, "f")
	if err != nil {
		t.Fatal(err)
	}
	late := randomPiece(6 << 10)
	const lateOff = 10 << 10 // over one folded extent
	client.SetFoldWritten(conn.Client, func(meta.StripeRec) bool {
		if _, err := other.WriteAt(ctx, late, lateOff); err != nil {
			t.Error(err)
		}
		if err := other.Flush(ctx); err != nil {
			t.Error(err)
		}
		return true
	})
	if err := f.FoldAll(ctx); err != nil {
		t.Fatalf("fold with an extent committed meanwhile: %v", err)
	}
	copy(ref[lateOff:], late)
	if ext, logs := deltaStats(t, conn, ino); ext != 1 || logs != 1 {
		t.Fatalf("after the fold: %d extents in %d log stripes, want the later one", ext, logs)
	}
	client.SetFoldWritten(conn.Client, nil)
	checkFile(t, fresh(conn), ino, ref, "after a fold with a later extent")
	g := reopen(t, conn, f)
	if err := g.FoldAll(ctx); err != nil {
		t.Fatal(err)
	}
	if ext, logs := deltaStats(t, conn, ino); ext != 0 || logs != 0 {
		t.Fatalf("after folding again: %d extents in %d log stripes", ext, logs)
	}
	checkFile(t, fresh(conn), ino, ref, "after folding again")
}
