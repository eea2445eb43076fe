package client

import "slices"

// spanSet is a set of byte offsets kept as sorted, disjoint, non-adjacent
// spans: what the later extents of a stripe cover, as eachDelta walks
// them from the last (a stripe folds at 4096 extents; asking each extent
// whether one later extent covers it took the square of that).
type spanSet struct{ s []span }

// add adds [a, b) to the set.
func (x *spanSet) add(a, b int) {
	if a >= b {
		return
	}
	// i: the first span that ends at or after a (it may merge with [a, b)).
	i, _ := slices.BinarySearchFunc(x.s, a, func(s span, a int) int { return s.b - a })
	j := i // j: the first span that begins after b
	for j < len(x.s) && x.s[j].a <= b {
		a, b = min(a, x.s[j].a), max(b, x.s[j].b)
		j++
	}
	x.s = slices.Replace(x.s, i, j, span{a, b})
}

// covers reports whether every offset of [a, b) is in the set.
func (x *spanSet) covers(a, b int) bool {
	// i: the first span that ends after a.
	i, _ := slices.BinarySearchFunc(x.s, a+1, func(s span, a int) int { return s.b - a })
	return i < len(x.s) && x.s[i].a <= a && x.s[i].b >= b
}
