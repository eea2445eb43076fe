package main

import (
	"fmt"
	"slices"
)

// breakdown is where one phase of a scaling point spent its time, from
// the trace of the servers' links (scalingTrace).
type breakdown struct {
	Seconds float64 // earliest task start to latest task end
	// StartUp is from the phase's start until the first server's link has
	// carried 2% of its bytes of the phase; Drain until the last server's
	// link has carried 98%; the tail is the rest.
	StartUp, Drain float64
	MiB            []float64 // per server, received (write) or sent (read)
	Rate           []float64 // per server, MiB/s from its 2% to its 98%
	Stalled        float64   // seconds the sampler itself did not run (the machine ran other work)
	CPU            float64   // the machine's busy share over the phase
	// Moved is the MiB the tasks wrote or read (set by the caller): the
	// servers' bytes over it is what a byte moved costs on their links
	// (a 2+1 write 1.5 and headers; a read 1, and more if it fetches
	// beyond what it returns).
	Moved float64
}

func (b breakdown) String() string {
	if len(b.MiB) == 0 {
		return fmt.Sprintf("%.2f s (no trace)", b.Seconds)
	}
	total := 0.0
	for _, m := range b.MiB {
		total += m
	}
	return fmt.Sprintf("%.2f s = start-up %.2f + streaming %.2f + tail %.2f; per server %.1f–%.1f MiB at %.2f–%.2f MiB/s; all servers %.1f MiB for %.1f MiB moved (%.3f×); sampler stalled %.2f s; CPU %.0f%% busy",
		b.Seconds, b.StartUp, b.Drain-b.StartUp, b.Seconds-b.Drain, slices.Min(b.MiB), slices.Max(b.MiB),
		slices.Min(b.Rate), slices.Max(b.Rate), total, b.Moved, total/max(b.Moved, 1e-9), b.Stalled, 100*b.CPU)
}

// phaseBreakdown breaks down the phase from t0 to t1 (trace seconds) of
// rows (samples from the one at or before t0 to the one at or after t1):
// write phases by the bytes the servers received, reads by those they
// sent.
func phaseBreakdown(rows []traceRow, t0, t1 float64, write bool) breakdown {
	b := breakdown{Seconds: t1 - t0}
	if len(rows) < 2 {
		return b
	}
	first, last := rows[0], rows[len(rows)-1]
	if last.total > first.total {
		b.CPU = float64(last.busy-first.busy) / float64(last.total-first.total)
	}
	for i := 1; i < len(rows); i++ {
		if gap := rows[i].t - rows[i-1].t; gap > 3*scalingTraceEvery.Seconds() {
			b.Stalled += gap - scalingTraceEvery.Seconds()
		}
	}
	bytesOf := func(r traceRow, s int) float64 {
		if write {
			return float64(r.rx[s])
		}
		return float64(r.tx[s])
	}
	// when returns the trace time at which server s had carried frac of
	// its phase's bytes, interpolated between samples.
	when := func(s int, frac float64) float64 {
		base, total := bytesOf(first, s), bytesOf(last, s)-bytesOf(first, s)
		goal := base + frac*total
		for i := 1; i < len(rows); i++ {
			lo, hi := bytesOf(rows[i-1], s), bytesOf(rows[i], s)
			if hi >= goal && hi > lo {
				return rows[i-1].t + (goal-lo)/(hi-lo)*(rows[i].t-rows[i-1].t)
			}
		}
		return last.t
	}
	b.StartUp = b.Seconds
	for s := range first.rx {
		mib := (bytesOf(last, s) - bytesOf(first, s)) / (1 << 20)
		from, to := when(s, 0.02), when(s, 0.98)
		b.MiB = append(b.MiB, mib)
		b.Rate = append(b.Rate, 0.96*mib/max(to-from, 1e-3))
		b.StartUp = min(b.StartUp, max(from-t0, 0))
		b.Drain = max(b.Drain, min(to-t0, b.Seconds))
	}
	return b
}
