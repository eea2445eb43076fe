package erasure

import (
	"bytes"
	"errors"
	"testing"
)

// fuzzSeeds returns valid fragments of several shard sizes. They are small
// (single block) because the fuzzer slows down sharply on large inputs;
// multi-block fragments are covered by the unit tests.
func fuzzSeeds(f *testing.F) [][]byte {
	var seeds [][]byte
	for _, S := range []int{1, 100, 4096} {
		_, _, frag := testFragment(f, S)
		seeds = append(seeds, frag)
	}
	return seeds
}

// checkReencode checks that the header h decoded from b re-encodes to the
// meaningful header bytes of b (the header padding is not checked on decode).
func checkReencode(t *testing.T, h Header, b []byte) {
	S := int(h.ShardSize)
	out := make([]byte, HeaderSize(S))
	putHeader(out, &h)
	if n := headerLen(S); !bytes.Equal(out[:n], b[:n]) {
		t.Fatalf("re-encoded header differs:\n got %x\nwant %x", out[:n], b[:n])
	}
	if _, err := DecodeHeader(out); err != nil {
		t.Fatalf("re-encoded header does not decode: %v", err)
	}
}

func FuzzDecodeHeader(f *testing.F) {
	for _, S := range []int{1, 4096, 3*BlockSize + 5, MaxShardSize} {
		h := testHeader(S)
		h.CRCs = make([]uint32, numBlocks(S))
		for i := range h.CRCs {
			h.CRCs[i] = uint32(i) * 0x9e3779b9
		}
		b := make([]byte, HeaderSize(S))
		putHeader(b, &h)
		f.Add(b)
	}
	f.Add([]byte("PFSF"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := DecodeHeader(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		if err := h.Validate(); err != nil {
			t.Fatalf("decoded header is invalid: %v", err)
		}
		checkReencode(t, h, b)
	})
}

func FuzzDecodeFragment(f *testing.F) {
	for _, frag := range fuzzSeeds(f) {
		f.Add(frag)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, data, err := DecodeFragment(b)
		var ce *ChecksumError
		switch {
		case errors.As(err, &ce):
			if len(ce.Blocks) == 0 || ce.Key != h.Key || len(data) != int(h.ShardSize) {
				t.Fatalf("bad ChecksumError %+v for %+v", ce, h)
			}
			for _, blk := range ce.Blocks {
				if blk < 0 || blk >= len(h.CRCs) {
					t.Fatalf("block %d out of range", blk)
				}
			}
			return
		case err != nil:
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v wraps neither ErrCorrupt nor ErrChecksum", err)
			}
			return
		}
		S := int(h.ShardSize)
		checkReencode(t, h, b)
		out := EncodeFragment(nil, h, data)
		hs := HeaderSize(S)
		if !bytes.Equal(out[hs:hs+S], b[hs:hs+S]) || !bytes.Equal(out[:headerLen(S)], b[:headerLen(S)]) {
			t.Fatal("re-encoded fragment differs")
		}
	})
}
