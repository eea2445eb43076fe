package client

import (
	"math/rand/v2"
	"testing"
)

// TestSpanSetProperty: a spanSet answers as a bitmap of the offsets
// added does, and its spans stay sorted, disjoint and apart.
func TestSpanSetProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		const n = 300
		var bits [n]bool
		var x spanSet
		for range r.IntN(40) {
			a := r.IntN(n)
			b := a + r.IntN(min(n-a, 1+r.IntN(30))+1)
			x.add(a, b)
			for i := a; i < b; i++ {
				bits[i] = true
			}
			for i, s := range x.s {
				if s.a >= s.b || (i > 0 && x.s[i-1].b >= s.a) {
					t.Fatalf("round %d: spans %v", round, x.s)
				}
			}
			for range 50 {
				a := r.IntN(n)
				b := a + 1 + r.IntN(n-a)
				want := true
				for i := a; i < b; i++ {
					want = want && bits[i]
				}
				if got := x.covers(a, b); got != want {
					t.Fatalf("round %d: covers(%d, %d) = %v, want %v; spans %v", round, a, b, got, want, x.s)
				}
			}
		}
	}
}
