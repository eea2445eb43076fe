package crc32c

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

var table = crc32.MakeTable(crc32.Castagnoli)

func TestCombine(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 300<<10)
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	lens := []int{0, 1, 2, 3, 7, 8, 63, 64, 4095, 4096, 65535, 65536, 65537, 200 << 10}
	for range 200 {
		lens = append(lens, r.IntN(len(buf)))
	}
	for _, total := range lens {
		cut := 0
		if total > 0 {
			cut = r.IntN(total + 1)
		}
		a, b := buf[:cut], buf[cut:total]
		want := crc32.Checksum(buf[:total], table)
		if got := Combine(crc32.Checksum(a, table), crc32.Checksum(b, table), int64(len(b))); got != want {
			t.Fatalf("Combine over %d+%d bytes = %#08x, want %#08x", len(a), len(b), got, want)
		}
		if got := ShiftFor(int64(len(b))).Combine(crc32.Checksum(a, table), crc32.Checksum(b, table)); got != want {
			t.Fatalf("Shifter over %d+%d bytes = %#08x, want %#08x", len(a), len(b), got, want)
		}
		// A seeded checksum (a salt first) continues the same way.
		salt := buf[total/2 : total/2+min(16, len(buf)-total/2)]
		seeded := crc32.Update(crc32.Checksum(salt, table), table, buf[:total])
		if got := Combine(crc32.Update(crc32.Checksum(salt, table), table, a), crc32.Checksum(b, table), int64(len(b))); got != seeded {
			t.Fatalf("seeded Combine over %d+%d bytes = %#08x, want %#08x", len(a), len(b), got, seeded)
		}
	}
}

func TestCombineMany(t *testing.T) {
	// Blocks of 64 KiB and a short last one, as a fragment's checksums.
	r := rand.New(rand.NewPCG(3, 4))
	buf := make([]byte, 5*65536+1234)
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	s := ShiftFor(65536)
	c := crc32.Checksum(nil, table)
	for off := 0; off < len(buf); off += 65536 {
		blk := buf[off:min(off+65536, len(buf))]
		if len(blk) == 65536 {
			c = s.Combine(c, crc32.Checksum(blk, table))
		} else {
			c = Combine(c, crc32.Checksum(blk, table), int64(len(blk)))
		}
	}
	if want := crc32.Checksum(buf, table); c != want {
		t.Fatalf("combined %#08x, want %#08x", c, want)
	}
}

func BenchmarkCombine64K(b *testing.B) {
	s := ShiftFor(65536)
	c := uint32(0)
	for i := range b.N {
		c = s.Combine(c, uint32(i))
	}
	_ = c
}
