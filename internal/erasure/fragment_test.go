package erasure

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
)

var testKey = FragmentKey{Ino: 0x1234, Stripe: 7, Gen: 0xabc, Index: 3}

func testHeader(S int) Header {
	return Header{Key: testKey, K: 8, M: 2, Pool: 5, StripeLen: uint32(min(8*S, 1<<31)), ShardSize: uint32(S)}
}

func testFragment(t testing.TB, S int) (Header, []byte, []byte) {
	shard := randBytes(rand.New(rand.NewPCG(uint64(S), 1)), S)
	h := testHeader(S)
	frag := EncodeFragment(nil, h, shard)
	return h, shard, frag
}

func TestHeaderSize(t *testing.T) {
	for _, tt := range []struct{ S, hs, fs int }{
		{1, 4096, 8192},
		{4096, 4096, 8192},
		{4097, 4096, 12288},
		{1 << 20, 4096, 4096 + 1<<20},
		{MaxShardSize, MaxHeaderSize, MaxHeaderSize + MaxShardSize},
	} {
		if hs, fs := HeaderSize(tt.S), FragmentSize(tt.S); hs != tt.hs || fs != tt.fs {
			t.Errorf("S=%d: HeaderSize %d FragmentSize %d, want %d %d", tt.S, hs, fs, tt.hs, tt.fs)
		}
	}
}

func TestFragmentRoundTrip(t *testing.T) {
	for _, S := range []int{1, 100, 4096, BlockSize, BlockSize + 1, 3*BlockSize - 7, 1 << 20, MaxShardSize} {
		h, shard, frag := testFragment(t, S)
		if len(frag) != FragmentSize(S) || !IsAligned(frag) {
			t.Fatalf("S=%d: fragment len %d aligned %v", S, len(frag), IsAligned(frag))
		}
		got, data, err := DecodeFragment(frag)
		if err != nil {
			t.Fatalf("S=%d: %v", S, err)
		}
		if got.Key != h.Key || got.K != h.K || got.M != h.M ||
			got.Pool != h.Pool || got.StripeLen != h.StripeLen || got.ShardSize != h.ShardSize {
			t.Fatalf("S=%d: header %+v, want %+v", S, got, h)
		}
		if len(got.CRCs) != (S+BlockSize-1)/BlockSize {
			t.Fatalf("S=%d: %d CRCs", S, len(got.CRCs))
		}
		if !bytes.Equal(data, shard) {
			t.Fatalf("S=%d: data differs", S)
		}
		// Zero-copy path produces the same bytes.
		buf := AlignedBuffer(FragmentSize(S))
		copy(FragmentShard(buf, S), shard)
		sealed := SealFragment(buf, testHeader(S))
		if !bytes.Equal(buf, frag) || !slices.Equal(sealed.CRCs, got.CRCs) {
			t.Fatalf("S=%d: SealFragment differs from EncodeFragment", S)
		}
	}
}

func TestEncodeFragmentReusesDst(t *testing.T) {
	const S = 5000
	_, shard, frag := testFragment(t, S)
	dst := AlignedBuffer(FragmentSize(S) + 100)
	for i := range dst {
		dst[i] = 0xff // stale content must not leak into padding
	}
	out := EncodeFragment(dst[:0], testHeader(S), shard)
	if &out[0] != &dst[0] || !bytes.Equal(out, frag) {
		t.Fatal("EncodeFragment did not reuse dst or produced different bytes")
	}
}

func TestDataBitFlip(t *testing.T) {
	const S = 3*BlockSize + 100
	_, _, frag := testFragment(t, S)
	for _, block := range []int{0, 1, 3} {
		b := slices.Clone(frag)
		b[HeaderSize(S)+block*BlockSize+42] ^= 0x10
		_, _, err := DecodeFragment(b)
		var ce *ChecksumError
		if !errors.Is(err, ErrChecksum) || !errors.As(err, &ce) {
			t.Fatalf("block %d: err = %v, want ChecksumError", block, err)
		}
		if ce.Key != testKey || !slices.Equal(ce.Blocks, []int{block}) {
			t.Fatalf("block %d: ChecksumError %+v", block, ce)
		}
		t.Log(err)
	}
	// Damage in the data padding is not checked.
	b := slices.Clone(frag)
	b[len(b)-1] = 1
	if _, _, err := DecodeFragment(b); err != nil {
		t.Fatalf("padding damage: %v", err)
	}
}

func TestHeaderBitFlip(t *testing.T) {
	const S = 2 * BlockSize
	_, _, frag := testFragment(t, S)
	n := headerLen(S)
	for i := range n * 8 {
		b := slices.Clone(frag[:HeaderSize(S)])
		b[i/8] ^= 1 << (i % 8)
		if _, err := DecodeHeader(b); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("bit %d flipped: err = %v, want ErrCorrupt", i, err)
		}
	}
}

func TestTruncated(t *testing.T) {
	const S = 10000
	_, _, frag := testFragment(t, S)
	for n := range HeaderSize(S) {
		if _, err := DecodeHeader(frag[:n]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("header truncated to %d: err = %v", n, err)
		}
	}
	for _, n := range []int{0, 100, HeaderSize(S), HeaderSize(S) + S - 1} {
		if _, _, err := DecodeFragment(frag[:n]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("fragment truncated to %d: err = %v", n, err)
		}
	}
	if _, _, err := DecodeFragment(frag[:HeaderSize(S)+S]); err != nil {
		t.Fatalf("fragment without data padding: %v", err)
	}
}

// forge rewrites a header field and recomputes the header CRC as if nblocks
// were honest, so that only the size checks can catch the lie.
func forge(b []byte, off int, v uint32) []byte {
	b = slices.Clone(b)
	binary.LittleEndian.PutUint32(b[off:], v)
	nb := int(binary.LittleEndian.Uint32(b[offNBlocks:]))
	if p := fixedSize + 4*nb; p+4 <= len(b) {
		binary.LittleEndian.PutUint32(b[p:], crc32.Checksum(b[:p], castagnoli))
	}
	return b
}

func TestLyingSizes(t *testing.T) {
	const S = 3 * BlockSize
	_, _, frag := testFragment(t, S)
	hdr := frag[:HeaderSize(S)]
	tests := []struct {
		name string
		b    []byte
	}{
		{"nblocks huge", forge(hdr, offNBlocks, 1<<31)},
		{"nblocks max", forge(hdr, offNBlocks, ^uint32(0))},
		{"nblocks too small", forge(hdr, offNBlocks, 1)},
		{"nblocks too big", forge(hdr, offNBlocks, 4)},
		{"shard size huge", forge(hdr, offShard, ^uint32(0))},
		{"shard size just over max", forge(hdr, offShard, MaxShardSize+1)},
		{"shard size zero", forge(hdr, offShard, 0)},
		{"block size", forge(hdr, offBlock, 4096)},
		{"stripe length over k*S", forge(hdr, offLen, 8*S+1)},
		{"stripe length zero", forge(hdr, offLen, 0)},
		{"version", forge(hdr, offVersion&^3, binary.LittleEndian.Uint32(hdr[4:])+1)},
		{"flags", forge(hdr, offFlags&^3, binary.LittleEndian.Uint32(hdr[4:])|1<<16)},
		{"index beyond k+m", forge(hdr, offIndex, 10|8<<8|2<<16)},
		{"k zero", forge(hdr, offIndex, 3|0<<8|2<<16)},
		{"k+m over 256", forge(hdr, offIndex, 3|200<<8|57<<16)},
		{"reserved", forge(hdr, offIndex, 3|8<<8|2<<16|1<<24)},
		{"magic", forge(hdr, offMagic, 0x46534650+1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			whole := append(slices.Clone(tt.b), frag[len(hdr):]...)
			var ms0, ms1 runtime.MemStats
			runtime.ReadMemStats(&ms0)
			_, err := DecodeHeader(tt.b)
			_, _, ferr := DecodeFragment(whole)
			runtime.ReadMemStats(&ms1)
			if !errors.Is(err, ErrCorrupt) || !errors.Is(ferr, ErrCorrupt) {
				t.Fatalf("DecodeHeader: %v; DecodeFragment: %v; want ErrCorrupt", err, ferr)
			}
			if a := ms1.TotalAlloc - ms0.TotalAlloc; a > 64<<10 {
				t.Fatalf("decoding allocated %d bytes", a)
			}
			t.Log(err)
		})
	}
}

func TestVerifyData(t *testing.T) {
	const S = 4*BlockSize + 1000
	_, shard, frag := testFragment(t, S)
	h, err := DecodeHeader(frag)
	if err != nil {
		t.Fatal(err)
	}
	full := FragmentShard(frag, S)
	padded := frag[HeaderSize(S):] // includes zero padding past S
	tests := []struct {
		name string
		data []byte
		off  int
		bad  []int
	}{
		{"whole shard", full, 0, nil},
		{"whole shard with padding", padded, 0, nil},
		{"middle blocks", shard[BlockSize : 3*BlockSize], BlockSize, nil},
		{"short last block", shard[4*BlockSize:], 4 * BlockSize, nil},
		{"empty", nil, 4 * BlockSize, nil},
		{"partial block", shard[BlockSize : 2*BlockSize-1], BlockSize, []int{1}},
		{"wrong offset", shard[:2*BlockSize], BlockSize, []int{1, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if bad := h.VerifyData(tt.data, tt.off); !slices.Equal(bad, tt.bad) {
				t.Fatalf("bad = %v, want %v", bad, tt.bad)
			}
		})
	}
	for _, off := range []int{-BlockSize, 1, S + BlockSize} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("VerifyData at offset %d did not panic", off)
				}
			}()
			h.VerifyData(shard, off)
		}()
	}
	if s, e := h.BlockExtent(BlockSize+5, 10); s != BlockSize || e != 2*BlockSize {
		t.Errorf("BlockExtent = %d, %d", s, e)
	}
	if s, e := h.BlockExtent(S-1, 1); s != 4*BlockSize || e != S {
		t.Errorf("BlockExtent at end = %d, %d", s, e)
	}
}
