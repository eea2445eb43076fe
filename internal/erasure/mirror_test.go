package erasure

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/klauspost/reedsolomon"
)

// TestMirrorIsCopies: a stripe with one data shard is a mirror. Every
// parity shard klauspost/reedsolomon computes for k = 1 is a literal copy
// of the data shard, and any one surviving shard reconstructs the data.
func TestMirrorIsCopies(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 1))
	for m := 1; m <= 4; m++ {
		for _, size := range []int{1, 4096, 64 << 10} {
			t.Run(fmt.Sprintf("1+%d/%d", m, size), func(t *testing.T) {
				cd, err := NewCodec(1, m)
				if err != nil {
					t.Fatal(err)
				}
				data := make([]byte, size)
				for i := range data {
					data[i] = byte(rng.Uint32())
				}
				shards := make([][]byte, 1+m)
				shards[0] = bytes.Clone(data)
				for i := 1; i <= m; i++ {
					shards[i] = make([]byte, size)
				}
				if err := cd.Encode(shards); err != nil {
					t.Fatal(err)
				}
				for i := 1; i <= m; i++ {
					if !bytes.Equal(shards[i], data) {
						t.Fatalf("parity %d is not a copy of the data", i)
					}
				}
				for keep := 0; keep <= m; keep++ {
					lost := make([][]byte, 1+m)
					lost[keep] = bytes.Clone(shards[keep])
					if err := cd.Reconstruct(lost, false); err != nil {
						t.Fatalf("only copy %d left: %v", keep, err)
					}
					for i := range lost {
						if !bytes.Equal(lost[i], data) {
							t.Fatalf("only copy %d left: shard %d reconstructed wrong", keep, i)
						}
					}
				}
			})
		}
	}
}

// TestSealCopy: sealing a mirror's copy with the checksums of the sealed
// first copy gives byte for byte the fragment SealFragment gives (only the
// header's index differs from the first copy's), allocates nothing, and
// refuses a source of another shard size.
func TestSealCopy(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 2))
	for _, size := range []int{1, 4096, 10000, 64 << 10} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			shard := make([]byte, size)
			for i := range shard {
				shard[i] = byte(rng.Uint32())
			}
			hdr := func(i int) Header {
				return Header{Key: FragmentKey{Ino: 7, Stripe: 0, Gen: 3, Index: uint8(i)}, K: 1, M: 2, Pool: 1,
					StripeLen: uint32(size), ShardSize: uint32(size)}
			}
			frag := func() []byte {
				b := AlignedBuffer(FragmentSize(size))
				for i := range b {
					b[i] = 0xee // what a pooled buffer held before
				}
				copy(FragmentShard(b, size), shard)
				return b
			}
			first, copied, want := frag(), frag(), frag()
			src := SealFragment(first, hdr(0))
			SealFragment(want, hdr(2))
			var got Header
			if allocs := testing.AllocsPerRun(3, func() { got = SealCopy(copied, hdr(2), src) }); allocs != 0 {
				t.Errorf("SealCopy allocated %.0f times, want none", allocs)
			}
			if !bytes.Equal(copied, want) {
				t.Fatal("SealCopy's fragment differs from SealFragment's")
			}
			h, data, err := DecodeFragment(copied)
			if err != nil || h.Key != hdr(2).Key || !bytes.Equal(data, shard) || len(got.CRCs) != len(src.CRCs) {
				t.Fatalf("decode of the copy: %v, key %v, data equal %v", err, h.Key, bytes.Equal(data, shard))
			}
			defer func() {
				if recover() == nil {
					t.Error("SealCopy with a source of another shard size did not panic")
				}
			}()
			other := hdr(1)
			other.ShardSize, other.StripeLen = uint32(size+4096), uint32(size+4096)
			SealCopy(AlignedBuffer(FragmentSize(size+4096)), other, src)
		})
	}
}

// TestMirrorEncodeCopies: a mirror's Encode gives the parity shards the
// Reed-Solomon library gives for k = 1 (which Reconstruct decodes), copies
// of the data shard, without the goroutines the library starts for a
// shard of a few KiB (no allocation).
func TestMirrorEncodeCopies(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 3))
	for m := 1; m <= 4; m++ {
		for _, size := range []int{4096, 16 << 10, 64 << 10} {
			t.Run(fmt.Sprintf("1+%d/%d", m, size), func(t *testing.T) {
				cd, err := NewCodec(1, m)
				if err != nil {
					t.Fatal(err)
				}
				lib, err := reedsolomon.New(1, m, codecOptions()...)
				if err != nil {
					t.Fatal(err)
				}
				data := make([]byte, size)
				for i := range data {
					data[i] = byte(rng.Uint32())
				}
				ours, theirs := make([][]byte, 1+m), make([][]byte, 1+m)
				ours[0], theirs[0] = bytes.Clone(data), bytes.Clone(data)
				for i := 1; i <= m; i++ {
					ours[i], theirs[i] = make([]byte, size), make([]byte, size)
				}
				if err := lib.Encode(theirs); err != nil {
					t.Fatal(err)
				}
				allocs := testing.AllocsPerRun(5, func() {
					if err := cd.Encode(ours); err != nil {
						t.Fatal(err)
					}
				})
				for i := range ours {
					if !bytes.Equal(ours[i], theirs[i]) {
						t.Fatalf("shard %d differs from the library's", i)
					}
				}
				if allocs != 0 {
					t.Errorf("Encode allocated %.0f times, want none", allocs)
				}
			})
		}
	}
}
