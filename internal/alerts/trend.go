package alerts

import "time"

// Sample is one reading of a pool's usage for its fill trend.
type Sample struct {
	T    time.Time `json:"t"`
	Used int64     `json:"used"`
}

// trendSamples is the most samples a pool's trend keeps: a new sample
// replaces the last one when it comes sooner than window/trendSamples
// after the one before it.
const trendSamples = 120

// addSample appends s to the trend (keeping one sample per
// window/trendSamples at most) and drops samples older than window.
func addSample(tr []Sample, s Sample, window time.Duration) []Sample {
	if n := len(tr); n >= 2 && s.T.Sub(tr[n-2].T) < window/trendSamples {
		tr[n-1] = s // too close to the one before: the latest reading wins
	} else if n > 0 && !s.T.After(tr[n-1].T) {
		tr[n-1] = s // the clock went back: no line through it
	} else {
		tr = append(tr, s)
	}
	i := 0
	for i < len(tr)-1 && s.T.Sub(tr[i].T) > window {
		i++
	}
	if i > 0 {
		tr = append(tr[:0], tr[i:]...)
	}
	if len(tr) > trendSamples+1 {
		tr = append(tr[:0], tr[len(tr)-trendSamples-1:]...)
	}
	return tr
}

// timeToFull is when the least-squares line through the samples reaches
// capacity, counted from the last sample; ok is false if the samples span
// less than minSpan or usage is not growing.
func timeToFull(tr []Sample, capacity int64, minSpan time.Duration) (time.Duration, bool) {
	if len(tr) < 3 || tr[len(tr)-1].T.Sub(tr[0].T) < minSpan {
		return 0, false
	}
	t0 := tr[0].T
	var sx, sy, sxx, sxy float64
	n := float64(len(tr))
	for _, s := range tr {
		x := s.T.Sub(t0).Seconds()
		y := float64(s.Used)
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	den := n*sxx - sx*sx
	if den <= 0 {
		return 0, false
	}
	slope := (n*sxy - sx*sy) / den // bytes per second
	if slope <= 0 {
		return 0, false
	}
	last := tr[len(tr)-1]
	intercept := (sy - slope*sx) / n
	at := last.T.Sub(t0).Seconds()
	left := float64(capacity) - (intercept + slope*at)
	if left <= 0 {
		return 0, true
	}
	secs := left / slope
	if secs > float64(100*365*24*time.Hour/time.Second) {
		return 0, false
	}
	return time.Duration(secs * float64(time.Second)), true
}
