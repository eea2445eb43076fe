package client

import (
	"bytes"
	"testing"

	"poolfs/internal/erasure"
)

// TestSmallStripeStagedWithoutCopies: the flush of a small file lays the
// handle's bytes into the stripe buffer and into a mirror's shard size
// without a flat copy of the stripe (no allocation at all), byte for byte
// what was written, zeros in the holes and after the end, whatever a pooled
// buffer held before.
func TestSmallStripeStagedWithoutCopies(t *testing.T) {
	const unit = 1 << 20
	pools := &pools{}
	pool := pools.get(3, unit)
	for _, tc := range []struct {
		name   string
		l      int
		writes []span // written ranges; the rest of [0, l) is a hole
	}{
		{"4KiB whole", 4096, []span{{0, 4096}}},
		{"64KiB whole", 64 << 10, []span{{0, 64 << 10}}},
		{"odd size whole", 10000, []span{{0, 10000}}},
		{"holes", 50000, []span{{100, 900}, {20000, 30000}}},
		{"hole at the end", 9000, []span{{0, 5000}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &dirtyStripe{k: 1, unit: unit}
			want := make([]byte, tc.l)
			for i, w := range tc.writes {
				p := bytes.Repeat([]byte{byte(i + 1), 0xa5, byte(w.a)}, w.b-w.a)[:w.b-w.a]
				d.write(w.a, p)
				copy(want[w.a:], p)
			}
			b := pool.get()
			defer pool.put(b)
			for _, f := range b.frags { // what an earlier stripe left
				for i := range f {
					f[i] = 0xee
				}
			}
			s := erasure.ShardSize(tc.l, 1, unit)
			allocs := testing.AllocsPerRun(1, func() {
				d.stage(b, tc.l)
				b.relayout(1, tc.l, s)
			})
			if allocs != 0 {
				t.Errorf("staging %d bytes allocated %.0f times, want none", tc.l, allocs)
			}
			sh := b.shard(0, s)
			if i := firstDiffAt(sh[:tc.l], want); i >= 0 {
				t.Fatalf("shard byte %d is %#x, want %#x", i, sh[i], want[i])
			}
			for i := tc.l; i < s; i++ {
				if sh[i] != 0 {
					t.Fatalf("shard byte %d after the end is %#x, want 0", i, sh[i])
				}
			}
		})
	}
}

// firstDiffAt returns the first index where a and b differ, or -1.
func firstDiffAt(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}
