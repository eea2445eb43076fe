package erasure

import "testing"

// BenchmarkMemoryCopy is the machine's memory bandwidth, the reference for
// copy costs in BENCHMARKS.md: one copy between two 512 MiB buffers (far
// larger than any cache) per operation.
func BenchmarkMemoryCopy(b *testing.B) {
	const size = 512 << 20
	src, dst := make([]byte, size), make([]byte, size)
	for i := range src {
		src[i] = byte(i)
	}
	copy(dst, src) // fault every page in before timing
	b.SetBytes(size)
	for b.Loop() {
		copy(dst, src)
	}
}
