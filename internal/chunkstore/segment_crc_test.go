package chunkstore

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"

	"poolfs/internal/erasure"
)

// sealed returns a sealed erasure fragment of shard size S with random
// shard bytes.
func sealed(r *rand.Rand, S int) []byte {
	buf := make([]byte, erasure.FragmentSize(S))
	hs := erasure.HeaderSize(S)
	for i := hs; i < hs+S; i++ {
		buf[i] = byte(r.Uint32())
	}
	key := erasure.FragmentKey{Ino: 7, Stripe: 3, Gen: 9, Index: 1}
	erasure.SealFragment(buf, erasure.Header{Key: key, K: 4, M: 2, StripeLen: uint32(4 * S), ShardSize: uint32(S)})
	return buf
}

// A record's data checksum combined from a sealed fragment's block
// checksums is the checksum of its bytes; anything else is checksummed
// byte by byte.
func TestDataCRC(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	var salt [saltSize]byte
	for i := range salt {
		salt[i] = byte(r.Uint32())
	}
	for _, S := range []int{1, 100, 4096, erasure.BlockSize - 1, erasure.BlockSize, erasure.BlockSize + 1, 3*erasure.BlockSize + 777, 1 << 20} {
		frag := sealed(r, S)
		if got, want := dataCRC(&salt, frag), saltedCRC(&salt, frag); got != want {
			t.Fatalf("shard %d: combined %#08x, want %#08x", S, got, want)
		}
		// Bytes that are not a whole sealed fragment.
		for _, b := range [][]byte{frag[:len(frag)-1], append(bytes.Clone(frag), 0), frag[:10], nil} {
			if got, want := dataCRC(&salt, b), saltedCRC(&salt, b); got != want {
				t.Fatalf("shard %d, %d bytes: %#08x, want %#08x", S, len(b), got, want)
			}
		}
		// A shard that differs from its header's checksums gives a
		// checksum its bytes do not match.
		bad := bytes.Clone(frag)
		bad[erasure.HeaderSize(S)] ^= 1
		if dataCRC(&salt, bad) == saltedCRC(&salt, bad) {
			t.Fatalf("shard %d: a changed byte kept the checksum of its bytes", S)
		}
	}
}

// A record whose shard bytes differ from its header's checksums (changed
// between sealing and the write) is dropped when its unsealed segment is
// scanned at open, as a torn record is; the records beside it stay.
func TestRecordOfAlteredShardDroppedAtOpen(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	dir := t.TempDir()
	opts := Options{Format: FormatSegments, DirectIO: true, SegmentSize: 1 << 20, Capacity: 1 << 30}
	d := openTest(t, dir, opts)
	good, bad := sealed(r, 100<<10), sealed(r, 100<<10)
	bad[erasure.HeaderSize(100<<10)+5] ^= 0x40
	kg, kb := erasure.FragmentKey{Ino: 1}, erasure.FragmentKey{Ino: 2}
	if err := d.WriteFragment(ctx, kg, good); err != nil {
		t.Fatal(err)
	}
	if err := d.WriteFragment(ctx, kb, bad); err != nil {
		t.Fatal(err)
	}
	crash(t, d) // no index: the next open scans the records
	d2 := openTest(t, dir, opts)
	if b, err := d2.ReadFragment(ctx, kg, 0, -1, nil); err != nil || !bytes.Equal(b, good) {
		t.Fatalf("good record after open: %v", err)
	}
	if _, err := d2.ReadFragment(ctx, kb, 0, -1, nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the record of an altered shard after open: %v, want ErrNotFound", err)
	}
}
