package bench

import (
	"bufio"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Series is one named line (X, Y pairs) or, in a BarChart, one value per
// category (X unused).
type Series struct {
	Name string
	X, Y []float64
}

// Mark is a shaded window of the x axis (a rebuild, a failure).
type Mark struct {
	Start, End float64
	Label      string
}

// LineChart is an SVG line chart with a legend.
type LineChart struct {
	Title, XLabel, YLabel string
	// LogX uses a log2 x axis, ticks at powers of two (transfer sizes).
	LogX bool
	// XFormat labels x ticks (default %g).
	XFormat func(float64) string
	Series  []Series
	Mark    *Mark
}

// TimelineChart is the throughput-over-time chart of an experiment: series
// of MiB/s against seconds, with the window [markStart, markEnd] shaded
// (e.g. while a rebuild ran). Set Title and Mark.Label on the result.
func TimelineChart(series []Series, markStart, markEnd float64) *LineChart {
	return &LineChart{
		Title: "Throughput over time", XLabel: "time (s)", YLabel: "MiB/s",
		Series: series, Mark: &Mark{Start: markStart, End: markEnd, Label: "window"},
	}
}

// BarChart is an SVG grouped bar chart: one group per category, one bar per
// series.
type BarChart struct {
	Title, XLabel, YLabel string
	Categories            []string
	Series                []Series
	// Highlight[i] draws category i's bars in the alert colour.
	Highlight []bool
	// Lines are horizontal reference lines (a threshold, a limit).
	Lines []HLine
}

// HLine is a labelled horizontal line.
type HLine struct {
	Y     float64
	Label string
}

const (
	svgW, svgH                   = 760, 420
	padL, padR, padT, padB       = 70, 190, 40, 60
	plotW, plotH                 = svgW - padL - padR, svgH - padT - padB
	alertColor                   = "#d62728"
	gridColor, axisColor, fontSz = "#dddddd", "#333333", 12
)

var palette = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"}

type svgWriter struct {
	w   *bufio.Writer
	err error
}

func (s *svgWriter) f(format string, a ...any) {
	if s.err == nil {
		_, s.err = fmt.Fprintf(s.w, format, a...)
	}
}

func esc(t string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(t))
	return b.String()
}

func (s *svgWriter) header(title, xlabel, ylabel string) {
	s.f(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="%d">`+"\n", svgW, svgH, svgW, svgH, fontSz)
	s.f(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	s.f(`<text x="%d" y="22" font-size="15" font-weight="bold">%s</text>`+"\n", padL, esc(title))
	s.f(`<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", padL+plotW/2, svgH-15, esc(xlabel))
	s.f(`<text transform="translate(16,%d) rotate(-90)" text-anchor="middle">%s</text>`+"\n", padT+plotH/2, esc(ylabel))
}

// yAxis draws horizontal grid lines and labels for [0, top] and returns
// the scale from a value to a y coordinate.
func (s *svgWriter) yAxis(top float64) func(float64) float64 {
	step := niceStep(top / 5)
	top = math.Ceil(top/step) * step
	y := func(v float64) float64 { return padT + plotH - v/top*plotH }
	for v := 0.0; v <= top+step/2; v += step {
		s.f(`<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s"/>`+"\n", padL, y(v), padL+plotW, y(v), gridColor)
		s.f(`<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", padL-6, y(v)+4, esc(fmtNum(v)))
	}
	s.f(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s"/>`+"\n", padL, padT, padL, padT+plotH, axisColor)
	s.f(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s"/>`+"\n", padL, padT+plotH, padL+plotW, padT+plotH, axisColor)
	return y
}

func (s *svgWriter) legend(names []string, colors []string) {
	for i, n := range names {
		y := padT + 10 + i*18
		s.f(`<rect x="%d" y="%d" width="12" height="12" fill="%s"/>`+"\n", padL+plotW+14, y-10, colors[i])
		s.f(`<text x="%d" y="%d">%s</text>`+"\n", padL+plotW+32, y, esc(n))
	}
}

// niceStep rounds a raw step up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if raw <= 0 || math.IsNaN(raw) || math.IsInf(raw, 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if raw <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func fmtNum(v float64) string {
	switch {
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'g', 4, 64) + "M"
	case v >= 1e4:
		return strconv.FormatFloat(v/1e3, 'g', 4, 64) + "k"
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

// WriteSVG renders the chart.
func (c *LineChart) WriteSVG(w io.Writer) error {
	s := &svgWriter{w: bufio.NewWriter(w)}
	s.header(c.Title, c.XLabel, c.YLabel)
	tx := func(x float64) float64 { return x }
	if c.LogX {
		tx = func(x float64) float64 { return math.Log2(math.Max(x, 1e-300)) }
	}
	xmin, xmax, ymax := math.Inf(1), math.Inf(-1), 0.0
	for _, se := range c.Series {
		for i := range se.X {
			xmin, xmax = math.Min(xmin, tx(se.X[i])), math.Max(xmax, tx(se.X[i]))
			ymax = math.Max(ymax, se.Y[i])
		}
	}
	if c.Mark != nil {
		xmin, xmax = math.Min(xmin, tx(c.Mark.Start)), math.Max(xmax, tx(c.Mark.End))
	}
	if math.IsInf(xmin, 0) {
		xmin, xmax = 0, 1
	}
	if xmax == xmin {
		xmin, xmax = xmin-1, xmax+1
	}
	if ymax <= 0 {
		ymax = 1
	}
	x := func(v float64) float64 { return padL + (tx(v)-xmin)/(xmax-xmin)*plotW }
	if c.Mark != nil {
		x0, x1 := x(c.Mark.Start), x(c.Mark.End)
		s.f(`<rect class="mark" x="%.1f" y="%d" width="%.1f" height="%d" fill="#f5c6c6" opacity="0.6"/>`+"\n", x0, padT, math.Max(x1-x0, 1), plotH)
		s.f(`<text x="%.1f" y="%d" fill="%s">%s</text>`+"\n", x0+3, padT+14, alertColor, esc(c.Mark.Label))
	}
	y := s.yAxis(ymax * 1.05)
	xf := c.XFormat
	if xf == nil {
		xf = func(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) }
	}
	for _, t := range xTicks(xmin, xmax, c.LogX) {
		s.f(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s"/>`+"\n", x(t), padT+plotH, x(t), padT+plotH+5, axisColor)
		s.f(`<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x(t), padT+plotH+18, esc(xf(t)))
	}
	var names, colors []string
	for i, se := range c.Series {
		col := palette[i%len(palette)]
		names, colors = append(names, se.Name), append(colors, col)
		var pts []string
		for j := range se.X {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(se.X[j]), y(se.Y[j])))
		}
		s.f(`<g class="series"><title>%s</title>`, esc(se.Name))
		s.f(`<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`, col, strings.Join(pts, " "))
		for _, p := range pts {
			xy := strings.Split(p, ",")
			s.f(`<circle cx="%s" cy="%s" r="3" fill="%s"/>`, xy[0], xy[1], col)
		}
		s.f("</g>\n")
	}
	s.legend(names, colors)
	s.f("</svg>\n")
	if s.err != nil {
		return s.err
	}
	return s.w.Flush()
}

// xTicks returns tick positions in axis units mapped back to data values.
func xTicks(lo, hi float64, log2 bool) []float64 {
	var out []float64
	if log2 {
		step := math.Max(1, math.Ceil((hi-lo)/10))
		for e := math.Ceil(lo); e <= hi+1e-9; e += step {
			out = append(out, math.Exp2(e))
		}
		return out
	}
	step := niceStep((hi - lo) / 8)
	for v := math.Ceil(lo/step) * step; v <= hi+1e-9; v += step {
		out = append(out, v)
	}
	return out
}

// WriteSVG renders the chart.
func (c *BarChart) WriteSVG(w io.Writer) error {
	s := &svgWriter{w: bufio.NewWriter(w)}
	s.header(c.Title, c.XLabel, c.YLabel)
	ymax := 0.0
	for _, se := range c.Series {
		for _, v := range se.Y {
			ymax = math.Max(ymax, v)
		}
	}
	for _, l := range c.Lines {
		ymax = math.Max(ymax, l.Y)
	}
	if ymax <= 0 {
		ymax = 1
	}
	y := s.yAxis(ymax * 1.05)
	nc := max(len(c.Categories), 1)
	group := float64(plotW) / float64(nc)
	bw := group * 0.8 / float64(max(len(c.Series), 1))
	var names, colors []string
	for si, se := range c.Series {
		col := palette[si%len(palette)]
		names, colors = append(names, se.Name), append(colors, col)
		s.f(`<g class="series"><title>%s</title>`+"\n", esc(se.Name))
		for ci, v := range se.Y {
			if ci >= nc {
				break
			}
			fill := col
			if ci < len(c.Highlight) && c.Highlight[ci] {
				fill = alertColor
			}
			x0 := padL + float64(ci)*group + group*0.1 + float64(si)*bw
			s.f(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s %s: %s</title></rect>`+"\n",
				x0, y(v), bw, y(0)-y(v), fill, esc(se.Name), esc(c.Categories[ci]), esc(fmtNum(v)))
		}
		s.f("</g>\n")
	}
	rot := ""
	if nc > 8 {
		rot = " rotate(-45)"
	}
	for ci, cat := range c.Categories {
		cx := padL + (float64(ci)+0.5)*group
		s.f(`<text transform="translate(%.1f,%d)%s" text-anchor="%s">%s</text>`+"\n", cx, padT+plotH+16, rot,
			map[bool]string{true: "end", false: "middle"}[rot != ""], esc(cat))
	}
	for _, l := range c.Lines {
		s.f(`<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s" stroke-dasharray="6,4"/>`+"\n", padL, y(l.Y), padL+plotW, y(l.Y), alertColor)
		s.f(`<text x="%d" y="%.1f" fill="%s">%s</text>`+"\n", padL+plotW+4, y(l.Y)+4, alertColor, esc(l.Label))
	}
	s.legend(names, colors)
	s.f("</svg>\n")
	if s.err != nil {
		return s.err
	}
	return s.w.Flush()
}
