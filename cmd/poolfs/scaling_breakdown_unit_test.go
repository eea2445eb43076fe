package main

import (
	"math"
	"testing"
)

// TestPhaseBreakdown checks the breakdown of a traced phase on made-up
// samples: two servers that start receiving 1 s into a 10 s write phase,
// carry 1 MiB/s each, the second stopping 2 s after the first, and a
// sampler that did not run for 1 s.
func TestPhaseBreakdown(t *testing.T) {
	var rows []traceRow
	for i := 0; i <= 100; i++ {
		tm := float64(i) / 10
		if i > 50 && i < 60 { // no samples from 5.0 to 6.0
			continue
		}
		a := min(max(tm-1, 0), 6) * (1 << 20) // 1 to 7 s
		b := min(max(tm-1, 0), 8) * (1 << 20) // 1 to 9 s
		rows = append(rows, traceRow{t: tm, busy: int64(i), total: int64(2 * i),
			rx: []int64{int64(a), int64(b)}, tx: []int64{0, 0}})
	}
	b := phaseBreakdown(rows, 0, 10, true)
	near := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 0.01 {
			t.Errorf("%s = %.3f, want %.3f", what, got, want)
		}
	}
	near("seconds", b.Seconds, 10)
	near("start-up", b.StartUp, 1+0.02*6) // the first server's 2%
	near("drain", b.Drain, 1+0.98*8)      // the last server's 98%
	near("MiB[0]", b.MiB[0], 6)
	near("MiB[1]", b.MiB[1], 8)
	near("rate[0]", b.Rate[0], 1)
	near("rate[1]", b.Rate[1], 1)
	near("stalled", b.Stalled, 0.9)
	near("cpu", b.CPU, 0.5)
	if r := phaseBreakdown(rows, 0, 10, false); r.MiB[0] != 0 || r.MiB[1] != 0 {
		t.Errorf("read phase counts received bytes: %v", r.MiB)
	}
}
