package meta_test

import (
	"context"
	"encoding/binary"
	"reflect"
	"testing"

	"poolfs/internal/meta"
)

// TestDeltaSumOfOldExtents: extents committed before summaries were kept
// (no E record) are summed up from the extents themselves when a write-back
// asks (StripeHeads), fsck accepts them, and their next change stores a
// summary of all of them.
func TestDeltaSumOfOldExtents(t *testing.T) {
	e, s, f := oneFile(t)
	ctx := context.Background()
	for st := range uint64(3) {
		if _, err := s.CommitStripes(ctx, f.Ino, []meta.StripeCommit{{Rec: sixDriveRec(st, 4<<20)}}, 12<<20, 0); err != nil {
			t.Fatal(err)
		}
	}
	commit := func(log uint64, l uint32, ds ...meta.Delta) {
		t.Helper()
		if _, err := s.CommitDeltas(ctx, f.Ino, []meta.LogCommit{{Rec: sixDriveRec(log, l), Deltas: ds}}, 0); err != nil {
			t.Fatal(err)
		}
	}
	commit(meta.LogStripeBase+1, 300,
		meta.Delta{Stripe: 0, BaseGen: 1, Off: 10, Len: 100},
		meta.Delta{Stripe: 2, BaseGen: 1, Off: 0, Len: 100, LogOff: 100},
		meta.Delta{Stripe: 0, BaseGen: 1, Off: 500, Len: 100, LogOff: 200})
	// Forget the summaries, as a store written before them has none.
	err := e.Update(ctx, func(tx meta.Tx) error {
		for _, st := range []uint64{0, 2} {
			k := binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64([]byte{'E'}, uint64(f.Ino)), st)
			if v, err := tx.Get(k); err != nil || v == nil {
				t.Fatalf("no summary of stripe %d before: %v", st, err)
			}
			if err := tx.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string) {
		t.Helper()
		recs, err := s.Stripes(ctx, f.Ino, 0, 2)
		if err != nil {
			t.Fatal(err)
		}
		heads, err := s.StripeHeads(ctx, f.Ino, 0, 2)
		if err != nil || len(heads) != len(recs) {
			t.Fatalf("%s: %d heads, %v", what, len(heads), err)
		}
		for i, h := range heads {
			if got, want := h.DeltaSum(), recs[i].DeltaSum(); !reflect.DeepEqual(got, want) {
				t.Errorf("%s: stripe %d summary %+v, its extents make %+v", what, h.Stripe, got, want)
			}
		}
		if probs, err := s.CheckNamespace(ctx, false); err != nil || len(probs) != 0 {
			t.Fatalf("%s: fsck: %v, %v", what, probs, err)
		}
	}
	check("without summaries")
	if h, _ := s.StripeHeads(ctx, f.Ino, 0, 0); h[0].Sum == nil || h[0].Sum.Extents != 2 || h[0].Sum.LastSeq != 2 {
		t.Fatalf("stripe 0 head without its summary: %+v", h[0].Sum)
	}
	commit(meta.LogStripeBase+2, 50, meta.Delta{Stripe: 0, BaseGen: 1, Off: 0, Len: 50})
	check("after one more extent")
	recs, err := s.Stripes(ctx, f.Ino, 0, 0)
	if err != nil || recs[0].Deltas[2].Seq != 3 {
		t.Fatalf("the new extent: %+v, %v; want sequence number 3", recs[0].Deltas, err)
	}
	// The stored summary is of all three extents.
	err = e.View(ctx, func(tx meta.Tx) error {
		k := binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64([]byte{'E'}, uint64(f.Ino)), 0)
		if v, err := tx.Get(k); err != nil || v == nil {
			t.Fatalf("no summary of stripe 0 after the commit: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestCommitDeltasOverScatteredStripes: CommitDeltas reads the summaries
// of stripes near each other in one scan and of distant ones apart; every
// stripe's extents get the sequence numbers after its own last one and its
// summary stays equal to its extents, whether its neighbours have extents
// or not, and for a stripe whose extents have no summary (committed before
// summaries were kept).
func TestCommitDeltasOverScatteredStripes(t *testing.T) {
	e, s, f := oneFile(t)
	ctx := context.Background()
	const n = 130
	for st := range uint64(n) {
		if _, err := s.CommitStripes(ctx, f.Ino, []meta.StripeCommit{{Rec: sixDriveRec(st, 4<<20)}}, n*(4<<20), 0); err != nil {
			t.Fatal(err)
		}
	}
	log := meta.LogStripeBase
	commit := func(sts ...uint64) {
		t.Helper()
		log++
		var ds []meta.Delta
		for i, st := range sts {
			ds = append(ds, meta.Delta{Stripe: st, BaseGen: 1, Off: uint32(10 * i), Len: 10, LogOff: uint32(10 * i)})
		}
		if _, err := s.CommitDeltas(ctx, f.Ino, []meta.LogCommit{{Rec: sixDriveRec(log, uint32(10*len(sts))), Deltas: ds}}, 0); err != nil {
			t.Fatal(err)
		}
	}
	commit(0, 1, 2, 5, 40, 41, 100, 101)
	commit(2, 41, 100)
	// Stripe 41's extents lose their summary, as if committed before
	// summaries were kept.
	err := e.Update(ctx, func(tx meta.Tx) error {
		return tx.Delete(binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64([]byte{'E'}, uint64(f.Ino)), 41))
	})
	if err != nil {
		t.Fatal(err)
	}
	commit(0, 1, 2, 3, 5, 20, 40, 41, 100, 129)
	want := map[uint64]int{0: 2, 1: 2, 2: 3, 3: 1, 5: 2, 20: 1, 40: 2, 41: 3, 100: 3, 101: 1, 129: 1}
	recs, err := s.Stripes(ctx, f.Ino, 0, n-1)
	if err != nil {
		t.Fatal(err)
	}
	heads, err := s.StripeHeads(ctx, f.Ino, 0, n-1)
	if err != nil || len(heads) != len(recs) {
		t.Fatalf("%d heads of %d records: %v", len(heads), len(recs), err)
	}
	for i, r := range recs {
		if len(r.Deltas) != want[r.Stripe] {
			t.Errorf("stripe %d has %d extents, want %d", r.Stripe, len(r.Deltas), want[r.Stripe])
		}
		for j, d := range r.Deltas {
			if d.Seq != uint64(j+1) {
				t.Errorf("stripe %d extent %d has sequence number %d, want %d", r.Stripe, j, d.Seq, j+1)
			}
		}
		if got, sum := heads[i].DeltaSum(), r.DeltaSum(); !reflect.DeepEqual(got, sum) {
			t.Errorf("stripe %d summary %+v, its extents make %+v", r.Stripe, got, sum)
		}
	}
	if probs, err := s.CheckNamespace(ctx, false); err != nil || len(probs) != 0 {
		t.Fatalf("fsck: %v, %v", probs, err)
	}
}
