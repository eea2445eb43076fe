package client

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"poolfs/internal/chunkstore"
)

// TestDirtySparse: small writes anywhere in a stripe are kept sparse (a
// write far into a stripe takes what it wrote, not a stripe buffer), read
// back over any range exactly as a reference copy, and move into a stripe
// buffer unchanged once they pass smallDirty. With the client's part
// buffers, two stripes written side by side take theirs from one pool
// that holds buffers full of garbage: no byte of one shows in the other,
// nor a byte nobody wrote, and a stripe released gives its parts back.
func TestDirtySparse(t *testing.T) {
	t.Run("allocated", func(t *testing.T) { testDirtySparse(t, nil) })
	t.Run("pooled", func(t *testing.T) {
		bufs := &chunkstore.Buffers{}
		var held [][]byte
		for n := 1 << 12; n <= smallDirty; n <<= 1 {
			for range 4 {
				b := bufs.Get(n)
				for i := range b {
					b[i] = 0xa5
				}
				held = append(held, b)
			}
		}
		for _, b := range held {
			bufs.Put(b)
		}
		testDirtySparse(t, bufs)
	})
}

func testDirtySparse(t *testing.T, bufs *chunkstore.Buffers) {
	const k, unit = 4, 256 << 10
	pools := &pools{}
	type stripe struct {
		d       *dirtyStripe
		ref     []byte
		written []bool
		total   int
	}
	var ss [2]*stripe
	for i := range ss {
		ss[i] = &stripe{
			d:   &dirtyStripe{k: k, unit: unit, pool: pools.get(k+2, unit), partBufs: bufs},
			ref: make([]byte, k*unit), written: make([]bool, k*unit),
		}
		defer ss[i].d.release()
	}
	check := func(s *stripe, what string) {
		t.Helper()
		for range 10 {
			a := rand.IntN(len(s.ref))
			b := a + rand.IntN(len(s.ref)-a)
			got := make([]byte, b-a)
			want := make([]byte, b-a)
			for i := a; i < b; i++ {
				if s.written[i] {
					want[i-a] = s.ref[i]
				}
			}
			s.d.overlay(got, a)
			if !bytes.Equal(got, want) {
				t.Fatalf("%s: overlay of [%d, %d) differs", what, a, b)
			}
		}
	}
	write := func(s *stripe, at int, p []byte) {
		s.d.write(at, p)
		copy(s.ref[at:], p)
		for i := at; i < at+len(p); i++ {
			if !s.written[i] {
				s.written[i] = true
				s.total++
			}
		}
	}
	for _, s := range ss {
		write(s, 3*unit+5, []byte("far into the stripe"))
		if !s.d.small() {
			t.Fatal("one small write far into the stripe took a stripe buffer")
		}
	}
	for ss[0].d.small() || ss[1].d.small() {
		for _, s := range ss {
			if !s.d.small() {
				continue
			}
			n := 1 + rand.IntN(8<<10)
			at := rand.IntN(len(s.ref) - n)
			if rand.IntN(3) == 0 && len(s.d.spans) > 0 { // touch or overlap a range
				sp := s.d.spans[rand.IntN(len(s.d.spans))]
				at = max(0, min(sp.b-n/2, len(s.ref)-n))
			}
			p := make([]byte, n)
			for i := range p {
				p[i] = byte(rand.Uint32())
			}
			write(s, at, p)
			if s.d.small() {
				check(s, "sparse")
				if s.d.bytes() != s.total {
					t.Fatalf("%d bytes held for %d written", s.d.bytes(), s.total)
				}
			}
		}
	}
	for _, s := range ss {
		check(s, "in a stripe buffer")
	}
}
