package dashboard

import (
	"fmt"
	"html"
	"html/template"
	"math"
	"strconv"
	"strings"
	"time"

	"poolfs/internal/dashboard/history"
)

// line is one series of a chart.
type line struct {
	Label  string
	Color  string
	Points []history.Point
}

// chartSVG draws lines as an inline SVG: a time axis over [from, to], a
// value axis from 0 to the largest value, gaps where a series has no data
// (NaN). format labels the value axis. Every text is escaped: the result
// is safe to put in a page.
func chartSVG(title string, lines []line, from, to time.Time, format func(float64) string) template.HTML {
	const w, h, left, right, top, bottom = 640.0, 170.0, 70.0, 10.0, 22.0, 22.0
	top0 := 0.0
	for _, l := range lines {
		for _, p := range l.Points {
			if !math.IsNaN(p.V) {
				top0 = max(top0, p.V)
			}
		}
	}
	ymax := niceCeil(top0)
	span := to.Sub(from).Seconds()
	x := func(t time.Time) float64 { return left + (w-left-right)*t.Sub(from).Seconds()/span }
	y := func(v float64) float64 { return h - bottom - (h-top-bottom)*v/ymax }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %g %g" role="img" aria-label="%s">`, w, h, html.EscapeString(title))
	fmt.Fprintf(&b, `<text x="%g" y="14" class="ct">%s</text>`, left, html.EscapeString(title))
	for i := 0; i <= 2; i++ {
		v := ymax * float64(i) / 2
		fmt.Fprintf(&b, `<line x1="%g" x2="%g" y1="%.1f" y2="%.1f" class="grid"/>`, left, w-right, y(v), y(v))
		fmt.Fprintf(&b, `<text x="%g" y="%.1f" class="ax" text-anchor="end">%s</text>`, left-4, y(v)+4, html.EscapeString(format(v)))
	}
	fmt.Fprintf(&b, `<text x="%g" y="%g" class="ax">%s</text>`, left, h-6, html.EscapeString(ago(to.Sub(from))))
	fmt.Fprintf(&b, `<text x="%g" y="%g" class="ax" text-anchor="end">now</text>`, w-right, h-6)
	lx := left + 16 + 7.5*float64(len(title))
	for _, l := range lines {
		fmt.Fprintf(&b, `<text x="%g" y="14" class="lg" fill="%s">■ %s</text>`, lx, l.Color, html.EscapeString(l.Label))
		lx += 14 + 8*float64(len(l.Label))
		var pts []string
		flush := func() {
			if len(pts) == 1 {
				pts = append(pts, pts[0])
			}
			if len(pts) > 0 {
				fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`, l.Color, strings.Join(pts, " "))
			}
			pts = pts[:0]
		}
		for _, p := range decimate(l.Points, maxChartPoints) {
			if math.IsNaN(p.V) {
				flush()
				continue
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(p.T), y(p.V)))
		}
		flush()
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) //nolint:gosec // built above, every text escaped
}

// maxChartPoints bounds the points of a line: about one per pixel of the
// chart's width, so that an hour of seconds does not weigh 3600 points.
const maxChartPoints = 560

// decimate merges runs of points so that at most n remain, each the
// largest value of its run (a one-second burst still shows) at the run's
// first time; a run with no data stays a gap.
func decimate(pts []history.Point, n int) []history.Point {
	if len(pts) <= n {
		return pts
	}
	per := (len(pts) + n - 1) / n
	out := make([]history.Point, 0, n)
	for i := 0; i < len(pts); i += per {
		run := pts[i:min(i+per, len(pts))]
		p := history.Point{T: run[0].T, V: math.NaN()}
		for _, q := range run {
			if !math.IsNaN(q.V) && (math.IsNaN(p.V) || q.V > p.V) {
				p.V = q.V
			}
		}
		out = append(out, p)
	}
	return out
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten (1 for 0).
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func ago(d time.Duration) string {
	switch {
	case d >= 24*time.Hour:
		return fmt.Sprintf("-%dd", int(d.Hours()/24+0.5))
	case d >= time.Hour:
		return fmt.Sprintf("-%dh", int(d.Hours()+0.5))
	}
	return fmt.Sprintf("-%dm", int(d.Minutes()+0.5))
}

// human formats bytes in binary units.
func human(n float64) string {
	const u = "KMGTPE"
	if n < 1024 {
		return strconv.FormatFloat(n, 'g', 3, 64) + " B"
	}
	f, i := n/1024, 0
	for f >= 1024 && i < len(u)-1 {
		f /= 1024
		i++
	}
	return fmt.Sprintf("%.1f %ciB", f, u[i])
}

func perSec(n float64) string { return human(n) + "/s" }

func opsPerSec(n float64) string {
	if n >= 10000 {
		return fmt.Sprintf("%.0fk/s", n/1000)
	}
	return strconv.FormatFloat(n, 'g', 3, 64) + "/s"
}

// timeToFull extrapolates the used bytes of points (a least-squares line
// through those with data) from used, the use now, to capacity. ok is
// false without a growth trend (fewer than two points, flat or shrinking
// use).
func timeToFull(points []history.Point, used, capacity float64, now time.Time) (time.Duration, float64, bool) {
	var n, sx, sy, sxx, sxy float64
	for _, p := range points {
		if math.IsNaN(p.V) {
			continue
		}
		t := p.T.Sub(now).Seconds()
		n++
		sx += t
		sy += p.V
		sxx += t * t
		sxy += t * p.V
	}
	if n < 2 || n*sxx-sx*sx == 0 {
		return 0, 0, false
	}
	slope := (n*sxy - sx*sy) / (n*sxx - sx*sx) // bytes per second
	if slope <= 0 {
		return 0, slope, false
	}
	left := max(0, capacity-used)
	return time.Duration(left / slope * float64(time.Second)), slope, true
}
