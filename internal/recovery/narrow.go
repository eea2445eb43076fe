package recovery

// Narrow and mirrored stripes.
//
// A stripe may have a scheme of its own, narrower than the pool's K+M
// (Stripe.K data fragments, the rest of its drives parity): a small file's
// mirrored stripe 0 is 1+M, a file with a narrow layout 4+2 in an 8+2 pool.
// A fresh narrow stripe of width w sits on the first w drives of its PG's
// set; the others are not its "missing" fragments. The planner judges every
// stripe by its own width: a fragment is lost when its drive is down, and is
// rebuilt onto a drive of the PG's new set that holds none of the stripe's
// fragments (so a narrow stripe can move to a set member it never used);
// more than the stripe's own parity lost is unrecoverable. A mirrored
// stripe's reconstruct reads one copy (K = 1).

// scheme returns the data and parity fragment counts of s: its own K, or
// in.K for a stripe recorded without one (which must then be full width).
// ok is false when the stripe's drives do not fit the pool's width.
func (in Input) scheme(s Stripe) (k, m int, ok bool) {
	k = s.K
	if k == 0 {
		k = in.K
		if len(s.Drives) != in.K+in.M {
			return k, 0, false
		}
	}
	m = len(s.Drives) - k
	return k, m, k >= 1 && m >= 0 && len(s.Drives) <= in.K+in.M
}

// dataK returns the number of fragments a reconstruct of s reads: its own
// K, or in.K for a stripe recorded without one.
func (in Input) dataK(s Stripe) int {
	k, _, _ := in.scheme(s)
	return k
}
