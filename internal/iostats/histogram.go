package iostats

import (
	"math/bits"
	"time"
)

// subBuckets is the number of buckets per power of two.
const subBuckets = 4

// maxOctave is the power of two (in µs) where the last regular bucket
// ends: 2^26 µs, about 67 s. Longer latencies go in the last bucket.
const maxOctave = 26

// NumBuckets is the number of buckets of a Histogram: bucket 0 holds
// latencies under 1 µs, bucket 1+4e+s those in [2^e·(1+s/4), 2^e·(1+(s+1)/4))
// µs, and the last one everything from 2^26 µs on.
const NumBuckets = 1 + maxOctave*subBuckets + 1

// Histogram counts latencies in fixed logarithmic buckets (see
// NumBuckets). The zero value is empty.
type Histogram [NumBuckets]uint64

// bucketOf returns the bucket of latency d.
func bucketOf(d time.Duration) int {
	us := uint64(max(d.Microseconds(), 0))
	if us == 0 {
		return 0
	}
	e := bits.Len64(us) - 1 // us in [2^e, 2^(e+1))
	if e >= maxOctave {
		return NumBuckets - 1
	}
	// The two bits after the leading one pick the quarter of the octave;
	// below 4 µs there are fewer bits and some buckets stay empty.
	var sub uint64
	if e >= 2 {
		sub = (us >> (e - 2)) & 3
	} else {
		sub = (us << (2 - e)) & 3
	}
	return 1 + e*subBuckets + int(sub)
}

// bucketBounds returns the latencies bucket i covers, [lo, hi).
func bucketBounds(i int) (lo, hi time.Duration) {
	switch {
	case i <= 0:
		return 0, time.Microsecond
	case i >= NumBuckets-1:
		lo = time.Duration(1<<maxOctave) * time.Microsecond
		return lo, 2 * lo
	}
	e, s := (i-1)/subBuckets, (i-1)%subBuckets
	base := float64(uint64(1)<<e) * float64(time.Microsecond)
	lo = time.Duration(base * (1 + float64(s)/subBuckets))
	hi = time.Duration(base * (1 + float64(s+1)/subBuckets))
	return lo, hi
}

// Observe counts one latency.
func (h *Histogram) Observe(d time.Duration) { h[bucketOf(d)]++ }

// Add adds o's counts to h.
func (h *Histogram) Add(o *Histogram) {
	for i, n := range o {
		h[i] += n
	}
}

// Count returns the number of latencies counted.
func (h *Histogram) Count() uint64 {
	var n uint64
	for _, c := range h {
		n += c
	}
	return n
}

// Quantile returns the latency below which a fraction q (0 < q ≤ 1) of the
// counted ones lie, as the middle of the bucket that holds it (within 12%
// of the true value above 4 µs); 0 for an empty histogram.
func (h *Histogram) Quantile(q float64) time.Duration {
	total := h.Count()
	if total == 0 {
		return 0
	}
	rank := uint64(q * float64(total))
	if rank < 1 {
		rank = 1
	}
	var seen uint64
	for i, c := range h {
		seen += c
		if seen >= rank {
			lo, hi := bucketBounds(i)
			return (lo + hi) / 2
		}
	}
	lo, hi := bucketBounds(NumBuckets - 1)
	return (lo + hi) / 2
}

// Buckets calls fn with the bounds of every bucket, [lo, hi) (the last
// one's hi is its lo doubled), and the count of latencies below hi, in
// increasing order: the cumulative form Prometheus histograms take.
func (h *Histogram) Buckets(fn func(lo, hi time.Duration, cumulative uint64)) {
	var seen uint64
	for i, c := range h {
		seen += c
		lo, hi := bucketBounds(i)
		fn(lo, hi, seen)
	}
}
