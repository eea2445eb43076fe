package erasure

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
)

func mustCodec(t testing.TB, k, m int) *Codec {
	t.Helper()
	c, err := NewCodec(k, m)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// subsets calls f with every subset of {0..n-1} of size exactly size.
func subsets(n, size int, f func([]int)) {
	var rec func(start int, cur []int)
	rec = func(start int, cur []int) {
		if len(cur) == size {
			f(cur)
			return
		}
		for i := start; i < n; i++ {
			rec(i+1, append(cur, i))
		}
	}
	rec(0, nil)
}

// encodeStripe splits and encodes a random stripe of L bytes.
func encodeStripe(t *testing.T, c *Codec, r *rand.Rand, L, unit int) (stripe []byte, shards [][]byte) {
	t.Helper()
	stripe = randBytes(r, L)
	S := ShardSize(L, c.K(), unit)
	shards = make([][]byte, c.K()+c.M())
	c.Split(stripe, S, shards)
	if err := c.Encode(shards); err != nil {
		t.Fatal(err)
	}
	return stripe, shards
}

// TestReconstructAnyErasures is the property test: every set of up to m
// erased shards (a random sample for wide codes) reconstructs byte-identical
// shards, and m+1 erasures fail with ErrTooManyLost.
func TestReconstructAnyErasures(t *testing.T) {
	const unit = 8 << 10
	const maxSubsets = 200
	schemes := []struct{ k, m int }{{4, 2}, {8, 2}, {8, 3}, {16, 2}, {16, 4}}
	for _, sc := range schemes {
		t.Run(mustCodec(t, sc.k, sc.m).String(), func(t *testing.T) {
			c := mustCodec(t, sc.k, sc.m)
			n := sc.k + sc.m
			r := rand.New(rand.NewPCG(uint64(sc.k), uint64(sc.m)))
			lengths := []int{1, sc.k * unit, sc.k*unit - 1, 4096*sc.k + 1, 1 + r.IntN(sc.k*unit), 1 + r.IntN(sc.k*unit)}
			for _, L := range lengths {
				stripe, orig := encodeStripe(t, c, r, L, unit)
				if ok, err := c.Verify(orig); !ok || err != nil {
					t.Fatalf("L=%d: Verify = %v, %v", L, ok, err)
				}
				for lost := 1; lost <= sc.m+1; lost++ {
					var sets [][]int
					subsets(n, lost, func(s []int) { sets = append(sets, append([]int(nil), s...)) })
					if len(sets) > maxSubsets {
						r.Shuffle(len(sets), func(i, j int) { sets[i], sets[j] = sets[j], sets[i] })
						sets = sets[:maxSubsets]
					}
					for _, erased := range sets {
						checkErasure(t, c, stripe, orig, erased)
					}
				}
			}
		})
	}
}

func checkErasure(t *testing.T, c *Codec, stripe []byte, orig [][]byte, erased []int) {
	t.Helper()
	for _, dataOnly := range []bool{false, true} {
		shards := make([][]byte, len(orig))
		for i := range orig {
			shards[i] = append([]byte(nil), orig[i]...)
		}
		for j, e := range erased {
			if j%2 == 0 {
				shards[e] = nil
			} else {
				shards[e] = shards[e][:0] // reuse capacity
			}
		}
		err := c.Reconstruct(shards, dataOnly)
		if len(erased) > c.M() {
			if !errors.Is(err, ErrTooManyLost) {
				t.Fatalf("L=%d erased %v: err = %v, want ErrTooManyLost", len(stripe), erased, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("L=%d erased %v dataOnly=%v: %v", len(stripe), erased, dataOnly, err)
		}
		for i := range shards {
			if dataOnly && i >= c.K() {
				continue
			}
			if !bytes.Equal(shards[i], orig[i]) {
				t.Fatalf("L=%d erased %v dataOnly=%v: shard %d differs", len(stripe), erased, dataOnly, i)
			}
		}
		if got := Join(nil, shards, c.K(), len(stripe)); !bytes.Equal(got, stripe) {
			t.Fatalf("L=%d erased %v: joined stripe differs", len(stripe), erased)
		}
	}
}

func TestVerifyDetectsDamage(t *testing.T) {
	c := mustCodec(t, 8, 2)
	_, shards := encodeStripe(t, c, rand.New(rand.NewPCG(5, 6)), 100000, 1<<20)
	for i := range shards {
		shards[i][77] ^= 1
		if ok, err := c.Verify(shards); ok || err != nil {
			t.Errorf("shard %d damaged: Verify = %v, %v", i, ok, err)
		}
		shards[i][77] ^= 1
	}
	shards[3] = nil
	if _, err := c.Verify(shards); err == nil {
		t.Error("Verify with a missing shard: no error")
	}
}

func TestNoParity(t *testing.T) {
	c := mustCodec(t, 4, 0)
	stripe, shards := encodeStripe(t, c, rand.New(rand.NewPCG(7, 8)), 5000, 1<<20)
	if err := c.Reconstruct(shards, false); err != nil {
		t.Fatalf("nothing lost: %v", err)
	}
	if got := Join(nil, shards, 4, len(stripe)); !bytes.Equal(got, stripe) {
		t.Fatal("Join differs")
	}
	shards[2] = nil
	if err := c.Reconstruct(shards, true); !errors.Is(err, ErrTooManyLost) {
		t.Fatalf("err = %v, want ErrTooManyLost", err)
	}
}

func TestNewCodecRejects(t *testing.T) {
	for _, sc := range [][2]int{{0, 2}, {-1, 1}, {4, -1}, {250, 7}} {
		if _, err := NewCodec(sc[0], sc[1]); err == nil {
			t.Errorf("NewCodec(%d, %d): no error", sc[0], sc[1])
		}
	}
}

func TestCodecShardChecks(t *testing.T) {
	c := mustCodec(t, 4, 2)
	_, shards := encodeStripe(t, c, rand.New(rand.NewPCG(9, 10)), 10000, 1<<20)
	if err := c.Encode(shards[:5]); err == nil {
		t.Error("Encode with 5 shards: no error")
	}
	shards[1] = shards[1][:100]
	if err := c.Encode(shards); err == nil {
		t.Error("Encode with unequal shards: no error")
	}
	shards[0] = nil
	if err := c.Reconstruct(shards, false); err == nil {
		t.Error("Reconstruct with unequal shards: no error")
	}
}

func TestSplitInPlaceAndReuse(t *testing.T) {
	c := mustCodec(t, 4, 2)
	const S = 8192
	stripe := randBytes(rand.New(rand.NewPCG(11, 12)), 4*S)
	shards := make([][]byte, 6)
	parity := make([]byte, S)
	shards[5] = parity[:0]
	c.SplitInPlace(stripe, S, shards)
	if &shards[1][0] != &stripe[S] {
		t.Error("SplitInPlace copied data shard 1")
	}
	if &shards[5][0] != &parity[0] {
		t.Error("SplitInPlace did not reuse parity capacity")
	}
	if err := c.Encode(shards); err != nil {
		t.Fatal(err)
	}
	want := append([]byte(nil), shards[2]...)
	buf := AlignedBuffer(FragmentSize(S))
	shards[2] = FragmentShard(buf, S)[:0]
	if err := c.Reconstruct(shards, false); err != nil {
		t.Fatal(err)
	}
	if &shards[2][0] != &buf[HeaderSize(S)] || !bytes.Equal(shards[2], want) {
		t.Error("Reconstruct did not rebuild into the provided fragment buffer")
	}
}

func TestCodecConcurrent(t *testing.T) {
	c := mustCodec(t, 8, 2)
	const unit = 65536
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 99))
			for range 10 {
				stripe := randBytes(r, 1+r.IntN(8*unit))
				shards := make([][]byte, 10)
				c.Split(stripe, ShardSize(len(stripe), 8, unit), shards)
				if err := c.Encode(shards); err != nil {
					t.Error(err)
					return
				}
				shards[r.IntN(8)], shards[8] = nil, nil
				if err := c.Reconstruct(shards, true); err != nil {
					t.Error(err)
					return
				}
				if !bytes.Equal(Join(nil, shards, 8, len(stripe)), stripe) {
					t.Error("concurrent reconstruct: stripe differs")
					return
				}
			}
		})
	}
	wg.Wait()
}
