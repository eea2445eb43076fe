package bench

import (
	"bytes"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// parseSVG checks that b is well-formed XML with an <svg> root and returns
// the text of every <title> (series names) and <text> element.
func parseSVG(t *testing.T, name string, b []byte) string {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(b))
	var texts []string
	root := ""
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s is not XML: %v", name, err)
		}
		switch v := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = v.Name.Local
			}
		case xml.CharData:
			texts = append(texts, string(v))
		}
	}
	if root != "svg" {
		t.Fatalf("%s: root element %q, want svg", name, root)
	}
	return strings.Join(texts, "\n")
}

func surveyFixture() *Result {
	s := &SurveyResult{Config: SurveyOptions{Size: 1 << 30, Record: 1 << 20, Threads: 4, Slow: 0.8}}
	for i, bw := range []float64{810, 830, 805, 560, 820, 815, 790, 800, 825, 812, 808, 818} {
		d := SurveyDrive{ID: "d" + string(rune('a'+i)), Server: "s0"}
		for _, ph := range SurveyPhases {
			d.Phases = append(d.Phases, SurveyPhase{Phase: ph, BW: bw, Ops: 1024, Bytes: 1 << 30, Seconds: 1024 / bw})
		}
		s.Drives = append(s.Drives, d)
	}
	flagSlow(s, 0.8)
	r := NewResult("survey", "e5560", t0, goldenHost)
	r.Survey = s
	return r
}

// TestReport renders the tables and charts of ior, mdtest and survey
// results: every chart parses as SVG and carries its series.
func TestReport(t *testing.T) {
	results := append(goldenResults(t), surveyFixture())
	dir := t.TempDir()
	var md bytes.Buffer
	if err := WriteReport(&md, results, ReportOptions{ChartDir: dir, Limits: []Limit{{"disk", 100}}}); err != nil {
		t.Fatal(err)
	}
	out := md.String()
	for _, want := range []string{
		"| 2 | 16k | 64k | 2 | read |", "% of disk", "| file-create |", "**SLOW** (write, rewrite, read",
		"![IOR bandwidth vs transfer size](", "survey-0-histogram.svg",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	charts := map[string][]string{
		"ior-bw-vs-transfer.svg": {"local scratch write, 1 tasks", "local scratch read, 2 tasks", "MiB/s"},
		"ior-bw-vs-tasks.svg":    {"local scratch write, 4k", "local scratch read, 16k"},
		"mdtest-ops.svg":         {"local scratch, 2 tasks, 4 dirs", "file-stat"},
		"survey-0-drives.svg":    {"dd", "80% of median"},
		"survey-0-histogram.svg": {"number of drives in this bin"},
	}
	for file, wants := range charts {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		text := parseSVG(t, file, b)
		for _, w := range wants {
			if !strings.Contains(text, w) {
				t.Errorf("%s lacks %q", file, w)
			}
		}
	}
	// The slow drive (dd, 560 MiB/s) is the one bar in the alert colour.
	b, _ := os.ReadFile(filepath.Join(dir, "survey-0-drives.svg"))
	if n := strings.Count(string(b), `fill="`+alertColor+`"><title>write dd`); n != 1 {
		t.Errorf("slow drive highlighted %d times, want once", n)
	}
	if n := strings.Count(string(b), `fill="`+alertColor+`"><title>`); n != 1 {
		t.Errorf("%d bars highlighted, want 1", n)
	}
}

func TestTimelineChart(t *testing.T) {
	c := TimelineChart([]Series{
		{Name: "client write", X: []float64{0, 10, 20, 30, 40}, Y: []float64{900, 910, 600, 620, 905}},
		{Name: "rebuild", X: []float64{0, 10, 20, 30, 40}, Y: []float64{0, 0, 300, 310, 0}},
	}, 15, 35)
	c.Title, c.Mark.Label = "Rebuild under load", "rebuild"
	var buf bytes.Buffer
	if err := c.WriteSVG(&buf); err != nil {
		t.Fatal(err)
	}
	text := parseSVG(t, "timeline", buf.Bytes())
	for _, w := range []string{"client write", "rebuild", "Rebuild under load", "time (s)"} {
		if !strings.Contains(text, w) {
			t.Errorf("timeline lacks %q", w)
		}
	}
	if !strings.Contains(buf.String(), `class="mark"`) {
		t.Error("timeline has no marked window")
	}
	// Empty and degenerate charts still render valid SVG.
	for _, c := range []svgChart{&LineChart{Title: "empty <&>"}, &BarChart{}, TimelineChart(nil, 1, 1)} {
		buf.Reset()
		if err := c.WriteSVG(&buf); err != nil {
			t.Fatal(err)
		}
		parseSVG(t, "degenerate", buf.Bytes())
	}
}

func TestParseLimit(t *testing.T) {
	if l, err := ParseLimit("disk=1450.5"); err != nil || l.Name != "disk" || l.MiBs != 1450.5 {
		t.Fatalf("ParseLimit: %+v, %v", l, err)
	}
	for _, bad := range []string{"disk", "=5", "disk=0", "disk=x"} {
		if _, err := ParseLimit(bad); err == nil {
			t.Errorf("ParseLimit(%q) accepted", bad)
		}
	}
}
