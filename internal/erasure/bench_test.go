package erasure

import (
	"math/rand/v2"
	"testing"
)

func benchShards(b *testing.B, c *Codec, S int) [][]byte {
	r := rand.New(rand.NewPCG(1, 2))
	stripe := randBytes(r, c.K()*S)
	shards := make([][]byte, c.K()+c.M())
	c.Split(stripe, S, shards)
	if err := c.Encode(shards); err != nil {
		b.Fatal(err)
	}
	return shards
}

func benchEncode(b *testing.B, k, m, S int) {
	c := mustCodec(b, k, m)
	shards := benchShards(b, c, S)
	b.SetBytes(int64(k * S))
	for b.Loop() {
		if err := c.Encode(shards); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncode8x2x1M(b *testing.B)  { benchEncode(b, 8, 2, 1<<20) }
func BenchmarkEncode4x2x1M(b *testing.B)  { benchEncode(b, 4, 2, 1<<20) }
func BenchmarkEncode16x4x1M(b *testing.B) { benchEncode(b, 16, 4, 1<<20) }
func BenchmarkEncode8x2x64K(b *testing.B) { benchEncode(b, 8, 2, 64<<10) }
func BenchmarkEncode8x2x4K(b *testing.B)  { benchEncode(b, 8, 2, 4<<10) }

func benchReconstruct(b *testing.B, k, m, S int, lost ...int) {
	c := mustCodec(b, k, m)
	shards := benchShards(b, c, S)
	b.SetBytes(int64(k * S))
	for b.Loop() {
		for _, i := range lost {
			shards[i] = shards[i][:0] // keep capacity: measure decoding, not allocation
		}
		if err := c.Reconstruct(shards, false); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReconstruct8x2x1M(b *testing.B)      { benchReconstruct(b, 8, 2, 1<<20, 3) }
func BenchmarkReconstruct8x2x1M2Lost(b *testing.B) { benchReconstruct(b, 8, 2, 1<<20, 0, 5) }

func BenchmarkSealFragment1M(b *testing.B) {
	const S = 1 << 20
	buf := AlignedBuffer(FragmentSize(S))
	copy(FragmentShard(buf, S), randBytes(rand.New(rand.NewPCG(1, 2)), S))
	h := testHeader(S)
	b.SetBytes(S)
	for b.Loop() {
		h = SealFragment(buf, h)
	}
}

func BenchmarkDecodeFragment1M(b *testing.B) {
	_, _, frag := testFragment(b, 1<<20)
	b.SetBytes(1 << 20)
	for b.Loop() {
		if _, _, err := DecodeFragment(frag); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerify1M measures the scrub parity check of an 8+2 stripe of 1 MiB
// shards.
func BenchmarkVerify1M(b *testing.B) {
	c := mustCodec(b, 8, 2)
	shards := benchShards(b, c, 1<<20)
	b.SetBytes(8 << 20)
	for b.Loop() {
		if ok, err := c.Verify(shards); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}
