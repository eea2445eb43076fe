package client_test

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"

	"poolfs/internal/chunkstore/drivetest"
	"poolfs/internal/client"
	"poolfs/internal/erasure"
	"poolfs/internal/meta"
	"poolfs/internal/placement"
)

// collect does what the collector does with its queue: it deletes the
// fragments of every queued generation from the drives and empties the
// queue. It returns how many fragments it deleted.
func collect(t *testing.T, conn *conn) int {
	t.Helper()
	ctx := context.Background()
	items, err := conn.Meta.GCList(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	var seqs []uint64
	for _, g := range items {
		for i, d := range g.Drives {
			key := erasure.FragmentKey{Ino: uint64(g.Ino), Stripe: g.Stripe, Gen: g.Gen, Index: uint8(i)}
			if conn.Drives[placement.DriveID(d)].Remove(key) {
				n++
			}
		}
		seqs = append(seqs, g.Seq)
	}
	if err := conn.Meta.GCDone(ctx, seqs); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestReadOverCollectedGenerationReadsAgain: a handle keeps the records of
// the stripes it read (close-to-open); another client rewrites those
// stripes and the collector deletes the old generations' fragments. The
// handle's next reads, ranged and whole-stripe, find the fragments of
// their records gone: that is a stale record, not data loss, and the
// reads (ranged, whole-stripe, and over the handle's unflushed bytes)
// fetch the records again and return the stripes' current bytes.
func TestReadOverCollectedGenerationReadsAgain(t *testing.T) {
	ctx := context.Background()
	conn := start(t)
	w, _ := written(t, conn, "f", 1<<20) // 4 stripes of 256 KiB
	r := reopen(t, conn, w)
	p := make([]byte, 4096)
	if _, err := r.ReadAt(ctx, p, 5000); err != nil { // r now holds the records
		t.Fatal(err)
	}
	o, err := fresh(conn).Client.Open(ctx, w.Attr().Ino, "f")
	if err != nil {
		t.Fatal(err)
	}
	neu := randomPiece(1 << 20)
	if _, err := o.WriteAt(ctx, neu, 0); err != nil {
		t.Fatal(err)
	}
	if err := o.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	o.Close()
	if n := collect(t, conn); n < 4*(testK+testM) {
		t.Fatalf("the collector deleted %d fragments, want the 4 old generations' %d", n, 4*(testK+testM))
	}
	// A read the handle's unflushed bytes overlap (done with its mutex
	// held) over a collected generation.
	mine := randomPiece(100)
	if _, err := r.WriteAt(ctx, mine, 300<<10+10); err != nil {
		t.Fatal(err)
	}
	copy(neu[300<<10+10:], mine)
	if _, err := r.ReadAt(ctx, p, 300<<10); err != nil {
		t.Fatalf("read over unflushed bytes and a collected generation: %v", err)
	}
	if !bytes.Equal(p, neu[300<<10:300<<10+len(p)]) {
		t.Fatal("read over unflushed bytes: not the current bytes with the handle's over them")
	}
	for _, off := range []int64{5000, 700 << 10} {
		if _, err := r.ReadAt(ctx, p, off); err != nil {
			t.Fatalf("ranged read at %d over a collected generation: %v", off, err)
		}
		if !bytes.Equal(p, neu[off:off+int64(len(p))]) {
			t.Fatalf("ranged read at %d: not the current bytes", off)
		}
	}
	all := make([]byte, 1<<20)
	if _, err := r.ReadAt(ctx, all, 0); err != nil {
		t.Fatalf("whole read over collected generations: %v", err)
	}
	if !bytes.Equal(all, neu) {
		t.Fatal("whole read: not the current bytes")
	}
}

// hookMeta runs hook once, after the first Stripes call for ino that
// returns a record, before that call returns: what another client does
// between a reader's fetch of records and its reads of the fragments.
type hookMeta struct {
	client.Meta
	ino  meta.Ino
	once sync.Once
	hook func()
}

func (h *hookMeta) Stripes(ctx context.Context, ino meta.Ino, first, last uint64) ([]meta.StripeRec, error) {
	recs, err := h.Meta.Stripes(ctx, ino, first, last)
	if err == nil && ino == h.ino && len(recs) > 0 {
		h.once.Do(h.hook)
	}
	return recs, err
}

// TestMergeOverCollectedGenerationMergesAgain: a write-back that merges
// part of a stripe reads the stripe's record, then another client
// replaces the stripe and the collector deletes the old generation before
// the merge reads its fragments. The merge is a conflict, not data loss:
// the flush merges again over the new generation and succeeds, and the
// file is the other client's bytes with this handle's laid over them.
func TestMergeOverCollectedGenerationMergesAgain(t *testing.T) {
	ctx := context.Background()
	conn := start(t)
	w, _ := written(t, conn, "f", 1<<20)
	ino := w.Attr().Ino
	w.Close()
	neu := randomPiece(1 << 20)
	collected := 0
	h := &hookMeta{Meta: conn.Meta, ino: ino}
	h.hook = func() {
		o, err := fresh(conn).Client.Open(ctx, ino, "f")
		if err == nil {
			_, err = o.WriteAt(ctx, neu, 0)
		}
		if err == nil {
			err = o.Flush(ctx)
			o.Close()
		}
		if err != nil {
			t.Errorf("the other client's write: %v", err)
		}
		collected = collect(t, conn)
	}
	c := client.New(h, conn.Maps, drivetest.UpOnly(conn.Drives), client.Options{NoDeltas: true})
	f, err := c.Open(ctx, ino, "f")
	if err != nil {
		t.Fatal(err)
	}
	// Three quarters of stripe 1: merged with the rest of the stripe.
	part := randomPiece(192 << 10)
	if _, err := f.WriteAt(ctx, part, 256<<10); err != nil {
		t.Fatal(err)
	}
	if err := f.Flush(ctx); err != nil {
		if errors.Is(err, client.ErrDataLoss) {
			t.Fatalf("flush over a stripe replaced and collected since its record was read: %v", err)
		}
		t.Fatal(err)
	}
	if collected == 0 {
		t.Fatal("the hook did not run: nothing was collected under the merge")
	}
	want := append([]byte(nil), neu...)
	copy(want[256<<10:], part)
	checkFile(t, fresh(conn), ino, want, "after the merge")
}
