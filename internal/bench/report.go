package bench

import (
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Limit is a reference bandwidth (raw disk, memory copy) that report
// tables express IOR and survey bandwidths against.
type Limit struct {
	Name string
	MiBs float64
}

// ParseLimit parses NAME=MiB/s ("disk=1450").
func ParseLimit(s string) (Limit, error) {
	name, v, ok := strings.Cut(s, "=")
	var l Limit
	if _, err := fmt.Sscanf(v, "%g", &l.MiBs); !ok || err != nil || name == "" || l.MiBs <= 0 {
		return l, fmt.Errorf("%w: limit %q: want NAME=MiB/s, e.g. disk=1450", ErrUsage, s)
	}
	l.Name = name
	return l, nil
}

// ReportOptions tune WriteReport.
type ReportOptions struct {
	// ChartDir receives the SVG charts; "" writes tables only. Markdown
	// links to the charts are relative to LinkDir (default ChartDir).
	ChartDir string
	LinkDir  string
	Limits   []Limit
}

// WriteReport writes Markdown tables for every result, in order, and the
// charts that compare them.
func WriteReport(w io.Writer, results []*Result, o ReportOptions) error {
	var iors, mds, surveys []*Result
	for _, r := range results {
		switch {
		case r.IOR != nil:
			iors = append(iors, r)
		case r.MDTest != nil:
			mds = append(mds, r)
		case r.Survey != nil:
			surveys = append(surveys, r)
		}
	}
	p := &mdWriter{w: w}
	if len(iors) > 0 {
		p.f("## IOR bandwidth\n\nMiB/s = 2^20 bytes per second over the slowest task's time (first task start to last task end), min/mean/max over iterations.\n\n")
		for _, r := range iors {
			writeIORTable(p, r, o.Limits)
		}
		for _, c := range iorCharts(iors) {
			p.chart(o, c.file, c.title, c.chart)
		}
	}
	if len(mds) > 0 {
		p.f("## mdtest metadata rates\n\nOperations per second over the slowest task's time, min/mean/max over iterations.\n\n")
		for _, r := range mds {
			writeMDTable(p, r)
		}
		p.chart(o, "mdtest-ops.svg", "mdtest ops/s per phase", mdChart(mds))
	}
	for i, r := range surveys {
		writeSurveyTable(p, r, o.Limits)
		drives, hist := surveyCharts(r)
		p.chart(o, fmt.Sprintf("survey-%d-drives.svg", i), "per-drive write bandwidth", drives)
		p.chart(o, fmt.Sprintf("survey-%d-histogram.svg", i), "histogram of drive write bandwidth", hist)
	}
	return p.err
}

type svgChart interface{ WriteSVG(io.Writer) error }

type mdWriter struct {
	w   io.Writer
	err error
}

func (p *mdWriter) f(format string, a ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, a...)
	}
}

func (p *mdWriter) chart(o ReportOptions, file, alt string, c svgChart) {
	if o.ChartDir == "" || c == nil || p.err != nil {
		return
	}
	f, err := os.Create(filepath.Join(o.ChartDir, file))
	if err != nil {
		p.err = err
		return
	}
	if err := c.WriteSVG(f); err != nil {
		f.Close()
		p.err = err
		return
	}
	if p.err = f.Close(); p.err != nil {
		return
	}
	link := o.LinkDir
	if link == "" {
		link = o.ChartDir
	}
	p.f("![%s](%s)\n\n", alt, filepath.ToSlash(filepath.Join(link, file)))
}

func label(r *Result) string {
	if r.Label != "" {
		return r.Label
	}
	return r.Kind
}

func limitHeader(limits []Limit) (string, string) {
	var h, s string
	for _, l := range limits {
		h += fmt.Sprintf(" %% of %s |", l.Name)
		s += "---:|"
	}
	return h, s
}

func limitCells(bw float64, limits []Limit) string {
	var c string
	for _, l := range limits {
		c += fmt.Sprintf(" %.0f%% |", 100*bw/l.MiBs)
	}
	return c
}

func writeIORTable(p *mdWriter, r *Result, limits []Limit) {
	c := r.IOR.Config
	mode := "shared file, " + c.Layout
	if c.FilePerTask {
		mode = "file per task"
	}
	order := "sequential"
	if c.Random {
		order = "random"
	}
	if c.Target.Direct {
		order += ", O_DIRECT"
	}
	p.f("### %s (%s, %s, %s)\n\n", label(r), c.Target.API, mode, order)
	lh, ls := limitHeader(limits)
	p.f("| tasks | transfer | block | segments | phase | MiB/s min | MiB/s mean | MiB/s max | IOPS mean |%s\n", lh)
	p.f("|---:|---:|---:|---:|---|---:|---:|---:|---:|%s\n", ls)
	for _, run := range r.IOR.Runs {
		for _, ph := range run.Phases {
			p.f("| %d | %s | %s | %d | %s | %.1f | %.1f | %.1f | %.0f |%s\n", run.Tasks, FormatSize(run.Transfer),
				FormatSize(run.Block), run.Segments, ph.Phase, ph.BW.Min, ph.BW.Mean, ph.BW.Max, ph.Rate.Mean, limitCells(ph.BW.Mean, limits))
		}
	}
	p.f("\n")
}

type namedChart struct {
	file, title string
	chart       svgChart
}

// iorCharts plots bandwidth against transfer size (one line per result,
// phase and task count) and against tasks (per result, phase and transfer),
// each only when the sweep has more than one point.
func iorCharts(results []*Result) []namedChart {
	vsTransfer := &LineChart{Title: "IOR bandwidth vs transfer size", XLabel: "transfer size", YLabel: "MiB/s (mean)",
		LogX: true, XFormat: func(v float64) string { return FormatSize(int64(math.Round(v))) }}
	vsTasks := &LineChart{Title: "IOR bandwidth vs tasks", XLabel: "tasks", YLabel: "MiB/s (mean)"}
	for _, r := range results {
		type key struct {
			phase string
			v     int64
		}
		byTasks, byTransfer := map[key]*Series{}, map[key]*Series{}
		var order []key
		var order2 []key
		for _, run := range r.IOR.Runs {
			for _, ph := range run.Phases {
				k := key{ph.Phase, int64(run.Tasks)}
				if byTasks[k] == nil {
					byTasks[k] = &Series{Name: fmt.Sprintf("%s %s, %d tasks", label(r), ph.Phase, run.Tasks)}
					order = append(order, k)
				}
				s := byTasks[k]
				s.X, s.Y = append(s.X, float64(run.Transfer)), append(s.Y, ph.BW.Mean)
				k2 := key{ph.Phase, run.Transfer}
				if byTransfer[k2] == nil {
					byTransfer[k2] = &Series{Name: fmt.Sprintf("%s %s, %s", label(r), ph.Phase, FormatSize(run.Transfer))}
					order2 = append(order2, k2)
				}
				s2 := byTransfer[k2]
				s2.X, s2.Y = append(s2.X, float64(run.Tasks)), append(s2.Y, ph.BW.Mean)
			}
		}
		for _, k := range order {
			if s := byTasks[k]; len(s.X) > 1 {
				sortSeries(s)
				vsTransfer.Series = append(vsTransfer.Series, *s)
			}
		}
		for _, k := range order2 {
			if s := byTransfer[k]; len(s.X) > 1 {
				sortSeries(s)
				vsTasks.Series = append(vsTasks.Series, *s)
			}
		}
	}
	var out []namedChart
	if len(vsTransfer.Series) > 0 {
		out = append(out, namedChart{"ior-bw-vs-transfer.svg", vsTransfer.Title, vsTransfer})
	}
	if len(vsTasks.Series) > 0 {
		out = append(out, namedChart{"ior-bw-vs-tasks.svg", vsTasks.Title, vsTasks})
	}
	return out
}

func sortSeries(s *Series) {
	idx := make([]int, len(s.X))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return s.X[idx[a]] < s.X[idx[b]] })
	x, y := make([]float64, len(idx)), make([]float64, len(idx))
	for i, j := range idx {
		x[i], y[i] = s.X[j], s.Y[j]
	}
	s.X, s.Y = x, y
}

func writeMDTable(p *mdWriter, r *Result) {
	c := r.MDTest.Config
	shared := "shared directories"
	if c.Unique {
		shared = "unique directory per task"
	}
	p.f("### %s (%s, %d items per task, %s, %d bytes per file)\n\n", label(r), c.Target.API, c.Items, shared, c.WriteBytes)
	p.f("| tasks | dirs | phase | ops/s min | ops/s mean | ops/s max |\n|---:|---:|---|---:|---:|---:|\n")
	for _, run := range r.MDTest.Runs {
		for _, ph := range run.Phases {
			p.f("| %d | %d | %s | %.0f | %.0f | %.0f |\n", run.Tasks, run.Dirs, ph.Phase, ph.Rate.Min, ph.Rate.Mean, ph.Rate.Max)
		}
	}
	p.f("\n")
}

// mdChart is ops/s per phase, one bar series per result and task count.
func mdChart(results []*Result) *BarChart {
	c := &BarChart{Title: "mdtest operations per second", XLabel: "phase", YLabel: "ops/s (mean)"}
	idx := map[string]int{}
	for _, r := range results {
		for _, run := range r.MDTest.Runs {
			for _, ph := range run.Phases {
				if _, ok := idx[ph.Phase]; !ok {
					idx[ph.Phase] = len(c.Categories)
					c.Categories = append(c.Categories, ph.Phase)
				}
			}
		}
	}
	for _, r := range results {
		for _, run := range r.MDTest.Runs {
			s := Series{Name: fmt.Sprintf("%s, %d tasks, %d dirs", label(r), run.Tasks, run.Dirs), Y: make([]float64, len(c.Categories))}
			for _, ph := range run.Phases {
				s.Y[idx[ph.Phase]] = ph.Rate.Mean
			}
			c.Series = append(c.Series, s)
		}
	}
	return c
}

func writeSurveyTable(p *mdWriter, r *Result, limits []Limit) {
	s := r.Survey
	p.f("## Drive survey: %s\n\n%s per drive, %s fragments, %d threads per drive, all drives at once; MiB/s over each drive's own time.\n\n",
		label(r), FormatSize(s.Config.Size), FormatSize(s.Config.Record), s.Config.Threads)
	p.f("| drive | server | write MiB/s | rewrite MiB/s | read MiB/s | write latency ms (min–max) | note |\n|---|---|---:|---:|---:|---:|---|\n")
	for _, d := range s.Drives {
		if d.Skipped != "" {
			p.f("| %s | %s | | | | | skipped: %s |\n", d.ID, d.Server, d.Skipped)
			continue
		}
		var notes []string
		if len(d.Slow) > 0 {
			notes = append(notes, fmt.Sprintf("**SLOW** (%s below %.0f%% of median)", strings.Join(d.Slow, ", "), 100*s.Config.Slow))
		}
		if d.Bad > 0 {
			notes = append(notes, fmt.Sprintf("**BAD**: %d of %d fragments read back corrupt", d.Bad, d.Phase("read").Ops))
		}
		note := strings.Join(notes, "; ")
		wr := d.Phase("write")
		p.f("| %s | %s | %.1f | %.1f | %.1f | %.1f–%.1f | %s |\n", d.ID, d.Server, wr.BW, d.Phase("rewrite").BW, d.Phase("read").BW, wr.LatMin, wr.LatMax, note)
	}
	lh, ls := limitHeader(limits)
	p.f("\n| pool | MiB/s | seconds | fragments |%s\n|---|---:|---:|---:|%s\n", lh, ls)
	for _, ph := range s.Pool {
		p.f("| %s | %.1f | %.2f | %d |%s\n", ph.Phase, ph.BW, ph.Seconds, ph.Ops, limitCells(ph.BW, limits))
	}
	p.f("\n")
}

// surveyCharts returns the per-drive write bandwidth bars (slow drives in
// the alert colour, the threshold dashed) and the histogram of drives per
// bandwidth bin (reference 000, figure 2).
func surveyCharts(r *Result) (*BarChart, *BarChart) {
	s := r.Survey
	bars := &BarChart{Title: "Write bandwidth per drive: " + label(r), XLabel: "drive", YLabel: "MiB/s"}
	ser := Series{Name: "write"}
	var bws []float64
	for _, d := range s.Drives {
		if d.Skipped != "" {
			continue
		}
		bw := d.Phase("write").BW
		bars.Categories = append(bars.Categories, d.ID)
		ser.Y = append(ser.Y, bw)
		bars.Highlight = append(bars.Highlight, len(d.Slow) > 0 && contains(d.Slow, "write"))
		bws = append(bws, bw)
	}
	bars.Series = []Series{ser}
	med := median(bws)
	bars.Lines = []HLine{{Y: med * s.Config.Slow, Label: fmt.Sprintf("%.0f%% of median", 100*s.Config.Slow)}}

	hist := &BarChart{Title: "Drives per write-bandwidth bin: " + label(r), XLabel: "write MiB/s", YLabel: "number of drives in this bin"}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range bws {
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	if len(bws) == 0 {
		return bars, hist
	}
	const bins = 10
	width := niceStep(math.Max((hi-lo)/bins, hi*0.01))
	start := math.Floor(lo/width) * width
	nb := int(math.Floor((hi-start)/width)) + 1
	counts := make([]float64, nb)
	for _, v := range bws {
		counts[min(int((v-start)/width), nb-1)]++
	}
	for b := range nb {
		a := start + float64(b)*width
		hist.Categories = append(hist.Categories, fmt.Sprintf("%s–%s", fmtNum(a), fmtNum(a+width)))
		hist.Highlight = append(hist.Highlight, a+width <= med*s.Config.Slow)
	}
	hist.Series = []Series{{Name: "drives", Y: counts}}
	return bars, hist
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
