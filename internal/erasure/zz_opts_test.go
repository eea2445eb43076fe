package erasure

import (
	"testing"

	"github.com/klauspost/reedsolomon"
)

func BenchmarkOpts(b *testing.B) {
	opts := map[string][]reedsolomon.Option{
		"default": nil,
		"auto1M":  {reedsolomon.WithAutoGoroutines(1 << 20)},
		"max1":    {reedsolomon.WithMaxGoroutines(1)},
		"max2":    {reedsolomon.WithMaxGoroutines(2)},
		"noGFNI":  {reedsolomon.WithAutoGoroutines(1 << 20), reedsolomon.WithGFNI(false), reedsolomon.WithAVXGFNI(false)},
	}
	for _, name := range []string{"default", "auto1M", "max1", "max2", "noGFNI"} {
		for _, S := range []int{4 << 10, 64 << 10, 1 << 20} {
			c, _ := newCodec(8, 2, opts[name]...)
			b.Run(name+"/"+itoa(S)+"/serial", func(b *testing.B) {
				shards := benchShards(b, c, S)
				b.SetBytes(int64(8 * S))
				for b.Loop() {
					c.Encode(shards)
				}
			})
			b.Run(name+"/"+itoa(S)+"/parallel", func(b *testing.B) {
				b.SetBytes(int64(8 * S))
				b.RunParallel(func(pb *testing.PB) {
					shards := benchShards(b, c, S)
					for pb.Next() {
						c.Encode(shards)
					}
				})
			})
		}
	}
}

func itoa(n int) string {
	if n >= 1<<20 {
		return string(rune('0'+n>>20)) + "M"
	}
	return string(rune('0'+n>>10/10)) + string(rune('0'+n>>10%10)) + "K"
}
