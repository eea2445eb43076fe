package client

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestDirtySparse: small writes anywhere in a stripe are kept sparse (a
// write far into a stripe takes what it wrote, not a stripe buffer), read
// back over any range exactly as a reference copy, and move into a stripe
// buffer unchanged once they pass smallDirty.
func TestDirtySparse(t *testing.T) {
	const k, unit = 4, 256 << 10
	pools := &pools{}
	d := &dirtyStripe{k: k, unit: unit, pool: pools.get(k+2, unit)}
	defer d.release()
	ref := make([]byte, k*unit)
	written := make([]bool, len(ref))
	check := func(what string) {
		t.Helper()
		for range 10 {
			a := rand.IntN(len(ref))
			b := a + rand.IntN(len(ref)-a)
			got := make([]byte, b-a)
			want := make([]byte, b-a)
			for i := a; i < b; i++ {
				if written[i] {
					want[i-a] = ref[i]
				}
			}
			d.overlay(got, a)
			if !bytes.Equal(got, want) {
				t.Fatalf("%s: overlay of [%d, %d) differs", what, a, b)
			}
		}
	}
	d.write(3*unit+5, []byte("far into the stripe"))
	copy(ref[3*unit+5:], "far into the stripe")
	total := len("far into the stripe")
	for i := range total {
		written[3*unit+5+i] = true
	}
	if !d.small() {
		t.Fatal("one small write far into the stripe took a stripe buffer")
	}
	for d.small() {
		n := 1 + rand.IntN(8<<10)
		at := rand.IntN(len(ref) - n)
		if rand.IntN(3) == 0 && len(d.spans) > 0 { // touch or overlap a range
			sp := d.spans[rand.IntN(len(d.spans))]
			at = max(0, min(sp.b-n/2, len(ref)-n))
		}
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(rand.Uint32())
		}
		d.write(at, p)
		copy(ref[at:], p)
		for i := at; i < at+n; i++ {
			if !written[i] {
				written[i] = true
				total++
			}
		}
		if d.small() {
			check("sparse")
			if d.bytes() != total {
				t.Fatalf("%d bytes held for %d written", d.bytes(), total)
			}
		}
	}
	check("in a stripe buffer")
}
