package erasure

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
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
