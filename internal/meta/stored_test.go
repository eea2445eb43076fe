package meta_test

import (
	"context"
	"encoding/binary"
	"testing"

	"poolfs/internal/meta"
)

// TestStoredCountedOnFirstChange: a file whose record predates the
// stored-bytes count stats with its size as before, and the first commit
// that changes its stripes counts the stripes it has (one scan).
func TestStoredCountedOnFirstChange(t *testing.T) {
	e, s, f := oneFile(t)
	ctx := context.Background()
	rec := func(stripe uint64, l uint32) meta.StripeCommit {
		d := uint32(stripe * 10)
		return meta.StripeCommit{Rec: meta.StripeRec{Stripe: stripe, Gen: 1, Len: l, ShardSize: 1 << 18,
			Drives: []uint32{d, d + 1, d + 2, d + 3, d + 4, d + 5}}}
	}
	a, err := s.CommitStripes(ctx, f.Ino, []meta.StripeCommit{rec(0, 4<<20), rec(7, 100)}, 7*(4<<20)+100, 0)
	if err != nil || a.Stored != 4<<20+100 {
		t.Fatalf("commit: stored %d, %v", a.Stored, err)
	}
	// Rewrite the record as before the count: flags "no xattrs" only,
	// no count after them.
	key := binary.BigEndian.AppendUint64([]byte{'i'}, uint64(f.Ino))
	err = e.Update(ctx, func(tx meta.Tx) error {
		v, err := tx.Get(key)
		if err != nil {
			return err
		}
		n := len(binary.AppendUvarint(nil, a.Stored))
		v = append(v[:len(v)-n-1], 1)
		return tx.Put(key, v)
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.Getattr(ctx, f.Ino); err != nil || got.Stored != got.Size {
		t.Fatalf("old record: stored %d, size %d, %v; want the size", got.Stored, got.Size, err)
	}
	a, err = s.CommitStripes(ctx, f.Ino, []meta.StripeCommit{rec(3, 4<<20)}, 0, 0)
	if err != nil || a.Stored != 2*(4<<20)+100 {
		t.Fatalf("first commit after: stored %d, %v; want %d", a.Stored, err, 2*(4<<20)+100)
	}
	if got, _ := s.Getattr(ctx, f.Ino); got.Stored != a.Stored {
		t.Fatalf("getattr: stored %d, want %d", got.Stored, a.Stored)
	}
}
