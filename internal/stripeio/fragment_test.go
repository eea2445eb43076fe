package stripeio

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"

	"poolfs/internal/chunkstore"
	"poolfs/internal/chunkstore/drivetest"
	"poolfs/internal/erasure"
	"poolfs/internal/placement"
)

// testStripe returns a 4+2 stripe of n user bytes with 64 KiB units, its
// k+m shards (parity computed) and the user bytes.
func testStripe(t *testing.T, n int) (*Stripe, [][]byte, []byte) {
	t.Helper()
	return testStripeUnit(t, n, 64<<10)
}

// testStripeUnit is testStripe with units of unit bytes.
func testStripeUnit(t *testing.T, n, unit int) (*Stripe, [][]byte, []byte) {
	t.Helper()
	const k, m = 4, 2
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(rand.Uint32())
	}
	st := &Stripe{Ino: 42, Stripe: 3, Gen: 5, K: k, M: m, Pool: 1, Len: uint32(n), ShardSize: erasure.ShardSize(n, k, unit)}
	var cds Codecs
	cd, err := cds.Get(k, m)
	if err != nil {
		t.Fatal(err)
	}
	shards := make([][]byte, k+m)
	cd.Split(data, st.ShardSize, shards)
	if err := cd.Encode(shards); err != nil {
		t.Fatal(err)
	}
	return st, shards, data
}

// writeAll writes every fragment of st to drive i of ds.
func writeAll(t *testing.T, ds drivetest.Drives, st *Stripe, shards [][]byte) {
	t.Helper()
	targets := make([]Loc, len(shards))
	frags := make([][]byte, len(shards))
	for i := range shards {
		targets[i], frags[i] = Loc{Index: i, Drive: placement.DriveID(i)}, NewFragment(st, shards[i])
	}
	if err := errors.Join(WriteFragments(context.Background(), OnMap(ds, nil), st, targets, frags)...); err != nil {
		t.Fatal(err)
	}
}

// TestWriteReadFragments: fragments written sealed read back verified,
// shard for shard, with the header the stripe says.
func TestWriteReadFragments(t *testing.T) {
	ds := drivetest.NewDrives(6)
	st, shards, _ := testStripe(t, 4*64<<10-1000)
	writeAll(t, ds, st, shards)
	for i := range shards {
		id := placement.DriveID(i)
		h, _, err := erasure.DecodeFragment(ds[id].Fragment(st.Key(i)))
		if err != nil {
			t.Fatal(err)
		}
		if want := st.Header(i); h.Key != want.Key || h.K != 4 || h.M != 2 || h.Pool != 1 || h.StripeLen != st.Len || int(h.ShardSize) != st.ShardSize {
			t.Fatalf("fragment %d: header %+v, want %+v", i, h, want)
		}
		got, err := ReadFragment(context.Background(), ds[id], id, st, i, erasure.AlignedBuffer(st.FragmentSize()))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, shards[i]) {
			t.Fatalf("fragment %d read back other bytes", i)
		}
	}
}

// TestReadFragmentRejects: a fragment that is missing, damaged, or of
// another generation or length than the stripe is an error, never data.
func TestReadFragmentRejects(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spoil func(d *drivetest.Drive, st *Stripe, shards [][]byte)
		want  error
	}{
		{"missing", func(d *drivetest.Drive, st *Stripe, _ [][]byte) {
			d.Remove(st.Key(0))
		}, chunkstore.ErrNotFound},
		{"bit flip in the shard", func(d *drivetest.Drive, st *Stripe, _ [][]byte) {
			if err := d.Corrupt(st.Key(0), erasure.HeaderSize(st.ShardSize)+100, 0); err != nil {
				panic(err)
			}
		}, erasure.ErrChecksum},
		{"other generation under the key", func(d *drivetest.Drive, st *Stripe, shards [][]byte) {
			old := *st
			old.Gen = 4
			frag := NewFragment(&old, shards[0])
			erasure.SealFragment(frag, old.Header(0))
			d.Put(st.Key(0), frag)
		}, erasure.ErrCorrupt},
		{"other stripe length", func(d *drivetest.Drive, st *Stripe, shards [][]byte) {
			other := *st
			other.Len--
			frag := NewFragment(&other, shards[0])
			erasure.SealFragment(frag, other.Header(0))
			d.Put(st.Key(0), frag)
		}, erasure.ErrCorrupt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ds := drivetest.NewDrives(6)
			st, shards, _ := testStripe(t, 3*64<<10)
			writeAll(t, ds, st, shards)
			tc.spoil(ds[0], st, shards)
			got, err := ReadFragment(context.Background(), ds[0], 0, st, 0, nil)
			if !errors.Is(err, tc.want) || got != nil {
				t.Fatalf("got %d bytes, error %v; want %v", len(got), err, tc.want)
			}
		})
	}
}

// TestWriteFragmentsReportsEach: a failing drive fails its own fragment
// only; the others are written.
func TestWriteFragmentsReportsEach(t *testing.T) {
	ds := drivetest.NewDrives(6)
	ds[2].FailWrites(chunkstore.ErrFull)
	st, shards, _ := testStripe(t, 64<<10)
	targets := make([]Loc, len(shards))
	frags := make([][]byte, len(shards))
	for i := range shards {
		targets[i], frags[i] = Loc{Index: i, Drive: placement.DriveID(i)}, NewFragment(st, shards[i])
	}
	errs := WriteFragments(context.Background(), OnMap(ds, nil), st, targets, frags)
	for i, err := range errs {
		if (i == 2) != (err != nil) || (i == 2 && !errors.Is(err, chunkstore.ErrFull)) {
			t.Fatalf("fragment %d: error %v", i, err)
		}
		if i != 2 && ds[placement.DriveID(i)].Fragment(st.Key(i)) == nil {
			t.Fatalf("fragment %d not written", i)
		}
	}
	if err := DeleteFragments(context.Background(), OnMap(ds, nil), st, targets[:2]); err != nil {
		t.Fatal(err)
	}
	if ds[0].Fragment(st.Key(0)) != nil || ds[1].Fragment(st.Key(1)) != nil || ds[3].Fragment(st.Key(3)) == nil {
		t.Fatal("DeleteFragments removed other fragments than it was given")
	}
}

// TestCodecsShared: every caller of one scheme gets the same codec, and
// a scheme no codec has is an error.
func TestCodecsShared(t *testing.T) {
	var cds Codecs
	first, err := cds.Get(8, 2)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if cd, err := cds.Get(8, 2); err != nil || cd != first {
				t.Errorf("Get(8, 2) = %p, %v; want the first codec %p", cd, err, first)
			}
		}()
	}
	wg.Wait()
	if other, _ := cds.Get(1, 2); other == first || other.K() != 1 {
		t.Fatalf("Get(1, 2) = %v", other)
	}
	if _, err := cds.Get(0, 2); err == nil {
		t.Fatal("Get(0, 2) made a codec")
	}
}

// TestReadRange: ranges of a shard read through its header come back
// byte for byte, checking only the blocks they touch: a damaged block
// fails the ranges that touch it and no other; a header of another
// stripe length is refused.
func TestReadRange(t *testing.T) {
	ds := drivetest.NewDrives(6)
	st, shards, _ := testStripeUnit(t, 4*256<<10, 256<<10) // four checksum blocks a shard
	writeAll(t, ds, st, shards)
	ctx := context.Background()
	d := ds[1]
	h, err := ReadHeader(ctx, d, 1, st, 1)
	if err != nil {
		t.Fatal(err)
	}
	bs := erasure.BlockSize
	if err := d.Corrupt(st.Key(1), erasure.HeaderSize(st.ShardSize)+2*bs+10, 1); err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct {
		off, n int
		bad    bool
	}{
		{0, 1, false},
		{100, 5000, false},
		{bs - 10, 20, false},
		{bs, bs, false},
		{2*bs - 1, 1, false},
		{2*bs - 1, 2, true},
		{2 * bs, 11, true},
		{3 * bs, bs, false},
		{0, 4 * bs, true},
	} {
		// Into a new buffer, and into a reused one that held other bytes.
		var reused []byte
		alloc := func(n int) []byte {
			reused = bytes.Repeat([]byte{0xa5}, n)
			return reused
		}
		for _, alloc := range []func(int) []byte{nil, alloc} {
			got, err := ReadRange(ctx, d, 1, st, 1, &h, r.off, r.n, alloc)
			if r.bad {
				if !errors.Is(err, erasure.ErrChecksum) {
					t.Fatalf("range [%d, +%d) over the damaged block: %v", r.off, r.n, err)
				}
				continue
			}
			if err != nil || !bytes.Equal(got, shards[1][r.off:r.off+r.n]) {
				t.Fatalf("range [%d, +%d): %v (bytes equal %v)", r.off, r.n, err, bytes.Equal(got, shards[1][r.off:r.off+r.n]))
			}
			if alloc != nil {
				before := bytes.Clone(reused)
				got[0] ^= 0xff // the same memory: the change shows in reused
				if bytes.Equal(before, reused) {
					t.Fatalf("range [%d, +%d): not read into the buffer alloc gave", r.off, r.n)
				}
			}
		}
	}
	other := *st
	other.Len--
	if _, err := ReadHeader(ctx, d, 1, &other, 1); !errors.Is(err, erasure.ErrCorrupt) {
		t.Fatalf("header read for another stripe length: %v", err)
	}
	d.Remove(st.Key(1))
	if _, err := ReadHeader(ctx, d, 1, st, 1); !errors.Is(err, chunkstore.ErrNotFound) {
		t.Fatalf("header of a missing fragment: %v", err)
	}
}
