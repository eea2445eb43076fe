package stripeio

import "testing"

// BenchmarkReconstruct8x2x1M decodes one lost data shard of an 8+2 stripe
// of 1 MiB shards, as a reconstruct task does: with a codec built for the
// task (what storage reconstruct did) and with the shared one of Codecs.
func BenchmarkReconstruct8x2x1M(b *testing.B) {
	const k, m, s = 8, 2, 1 << 20
	var cds Codecs
	cd, err := cds.Get(k, m)
	if err != nil {
		b.Fatal(err)
	}
	shards := make([][]byte, k+m)
	for i := range shards {
		shards[i] = make([]byte, s)
		if i < k {
			for j := range shards[i] {
				shards[i][j] = byte(i + j)
			}
		}
	}
	if err := cd.Encode(shards); err != nil {
		b.Fatal(err)
	}
	st := &Stripe{K: k, M: m, ShardSize: s}
	lost := make([]byte, 0, s)
	for _, bc := range []struct {
		name  string
		codec func() *Codecs
	}{
		{"codec-per-task", func() *Codecs { return &Codecs{} }},
		{"shared-codec", func() *Codecs { return &cds }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(k * s)
			for b.Loop() {
				shards[3] = lost[:0]
				if err := Reconstruct(bc.codec(), st, shards, []int{3}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
