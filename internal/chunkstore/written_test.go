package chunkstore

import (
	"errors"
	"testing"
)

// TestWrittenCountsStoredFragments checks Usage.Written, the counter write
// amplification is measured with: every fragment stored adds its length
// and, in the segments format, its record header block (a rewrite of a key
// too: the drive wrote it again), refused and invalid writes add nothing,
// deletes take nothing away, and a reopened drive starts from 0.
func TestWrittenCountsStoredFragments(t *testing.T) {
	forEachFormat(t, func(t *testing.T, opts Options) {
		opts.Capacity = 8 * Align
		dir := t.TempDir()
		d := openTest(t, dir, opts)
		written := func() int64 {
			t.Helper()
			u, err := d.Stat(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return u.Written
		}
		if w := written(); w != 0 {
			t.Fatalf("new drive: written %d, want 0", w)
		}
		header := int64(0) // bytes the format writes beside each fragment
		if opts.Format == FormatSegments {
			header = Align
		}
		var want int64
		for i := range 3 {
			size := (i + 1) * Align
			if err := d.WriteFragment(ctx, key(i), pattern(size, uint64(i))); err != nil {
				t.Fatal(err)
			}
			want += int64(size) + header
		}
		if err := d.WriteFragment(ctx, key(0), pattern(Align, 0)); err != nil { // a retry
			t.Fatal(err)
		}
		want += Align + header
		if err := d.WriteFragment(ctx, key(7), make([]byte, 4*Align)); !errors.Is(err, ErrFull) {
			t.Fatalf("want ErrFull, got %v", err)
		}
		if err := d.WriteFragment(ctx, key(8), make([]byte, 100)); !errors.Is(err, ErrInvalid) {
			t.Fatalf("want ErrInvalid, got %v", err)
		}
		if err := d.DeleteFragment(ctx, key(2)); err != nil {
			t.Fatal(err)
		}
		if w := written(); w != want {
			t.Fatalf("written %d, want %d (7 blocks of fragments, 4 record headers of %d)", w, want, header)
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		d = openTest(t, dir, opts)
		if w := written(); w != 0 {
			t.Fatalf("reopened drive: written %d, want 0", w)
		}
	})
}

// TestReadsAndWritesCounted checks Usage.Reads, ReadBytes and Writes, the
// counters the dashboard's charts turn into rates: a read that succeeds
// counts once with the bytes it returned (a range read its range), a
// missing fragment nothing; every fragment stored counts one write.
func TestReadsAndWritesCounted(t *testing.T) {
	forEachFormat(t, func(t *testing.T, opts Options) {
		d := openTest(t, t.TempDir(), opts)
		for i := range 2 {
			if err := d.WriteFragment(ctx, key(i), pattern(2*Align, uint64(i))); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := d.ReadFragment(ctx, key(0), 0, -1, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := d.ReadFragment(ctx, key(1), Align, Align, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := d.ReadFragment(ctx, key(5), 0, -1, nil); !errors.Is(err, ErrNotFound) {
			t.Fatalf("want ErrNotFound, got %v", err)
		}
		u, err := d.Stat(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if u.Writes != 2 || u.Reads != 2 || u.ReadBytes != 3*Align {
			t.Fatalf("writes %d reads %d read bytes %d, want 2, 2, %d", u.Writes, u.Reads, u.ReadBytes, 3*Align)
		}
	})
}
