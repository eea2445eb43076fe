package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"poolfs/internal/plan"
)

// runRoot runs the poolfs command line with args and returns its stdout.
func runRoot(t *testing.T, args ...string) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdout
	os.Stdout = w
	root := newRoot()
	root.SetArgs(args)
	runErr := root.Execute()
	w.Close()
	os.Stdout = old
	var out bytes.Buffer
	io.Copy(&out, r)
	if runErr != nil {
		t.Fatalf("poolfs %s: %v\n%s", strings.Join(args, " "), runErr, out.String())
	}
	return out.String()
}

// TestPlanCommands runs the three planning commands on small pools and
// checks their tables, charts and the bench comparison.
func TestPlanCommands(t *testing.T) {
	dir := t.TempDir()
	out := runRoot(t, "plan", "capacity", "--drives", "60", "--drive-size", "1T", "--scheme", "8+2", "--svg", filepath.Join(dir, "c.svg"))
	if !strings.Contains(out, "8+2 declustered") || !strings.Contains(out, "8+2 grouped") {
		t.Errorf("capacity table:\n%s", out)
	}
	out = runRoot(t, "plan", "rebuild", "--drives", "24,48", "--drive-size", "64G", "--fill", "10G", "--layout", "declustered",
		"--svg", filepath.Join(dir, "r.svg"))
	if strings.Count(out, "8+2 declustered") != 2 {
		t.Errorf("rebuild table:\n%s", out)
	}
	out = runRoot(t, "plan", "reliability", "--drives", "24", "--drive-size", "64G", "--fill", "10G", "--layout", "grouped",
		"--trials", "2000", "--svg", filepath.Join(dir, "l.svg"))
	if !strings.Contains(out, "8+2 grouped") || !strings.Contains(out, " y [") {
		t.Errorf("reliability table:\n%s", out)
	}
	for _, f := range []string{"c.svg", "r.svg", "l.svg"} {
		if b, err := os.ReadFile(filepath.Join(dir, f)); err != nil || !bytes.HasPrefix(b, []byte("<svg")) {
			t.Errorf("%s: %v, %.20q", f, err, b)
		}
	}
	// A bench result file: measured and predicted side by side.
	bench := map[string]any{"command": "poolfs bench rebuild --drives 24 --fill 64M", "runs": []map[string]any{{
		"layout": "declustered", "drives": 24, "scheme": "8+2", "fill_bytes": 64 << 20, "run_sec": 10.0, "healthy_mib_s": 5.0}}}
	b, _ := json.Marshal(bench)
	bf := filepath.Join(dir, "rebuild.json")
	if err := os.WriteFile(bf, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out = runRoot(t, "plan", "rebuild", "--from-bench", bf)
	if !strings.Contains(out, "rebuild") || !strings.Contains(out, "10.0s") {
		t.Errorf("bench comparison:\n%s", out)
	}
}

func TestPlanRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"plan", "capacity", "--drives", "6"},
		{"plan", "rebuild", "--drives", "60", "--fill", "150%"},
		{"plan", "rebuild", "--drive-model", "custom"},
		{"plan", "reliability", "--afr", "0"},
		{"plan", "reliability", "--rebuild-hours", "-1"},
		{"plan", "reliability", "--correlation", "-2"},
	} {
		root := newRoot()
		root.SetArgs(args)
		root.SetOut(io.Discard)
		root.SetErr(io.Discard)
		if err := root.Execute(); err == nil {
			t.Errorf("poolfs %s: no error", strings.Join(args, " "))
		}
	}
}

// TestPlanReliabilityPublished: the command line, with the textbook model's
// options, gives the RAID-6 (P+Q) MTTDL of Chen et al., "RAID:
// High-Performance, Reliable Secondary Storage", ACM Computing Surveys
// 26(2), 1994, Table 6: 38,052 years for 100 data disks in 16-disk groups
// (MTTF 200,000 h, MTTR 1 h, each further failure 10 times likelier),
// that is 38,052 × 100/14 years of 8,760 hours for one group
// (internal/plan's TestPublishedRAID6MTTDL checks the model itself).
func TestPlanReliabilityPublished(t *testing.T) {
	out := runRoot(t, "plan", "reliability", "--drives", "16", "--scheme", "14+2", "--layout", "grouped", "--preservation", "-1",
		"--drive-size", "5000000000", "--afr", fmt.Sprint(float64(plan.HoursPerYear)/200000), "--lse-per-drive-year", "0",
		"--rebuild-hours", "1", "--serial-repair", "--correlation", "10", "--exponential-repair", "--trials", "20000")
	m := regexp.MustCompile(`14\+2 grouped.* (\S+) y \S+ y \[`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no MTTDL in:\n%s", out)
	}
	got, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	want := 38052 * 100.0 / 14 * 8760 / plan.HoursPerYear
	if math.Abs(got/want-1) > 0.02 {
		t.Fatalf("Markov MTTDL %g years for one group, want %.4g (Chen et al. 1994) within 2%%:\n%s", got, want, out)
	}
}

// TestPredictBenchTakesTheRebuiltBytes: a bench run is predicted with the
// bytes its failed drive held (rebuilt_bytes), not the pool's mean: the
// same pool and fill with twice the bytes rebuilt is predicted to take
// longer, and with none recorded the fill's mean stands.
func TestPredictBenchTakesTheRebuiltBytes(t *testing.T) {
	dir := t.TempDir()
	predict := func(rebuilt int64) float64 {
		t.Helper()
		run := map[string]any{"layout": "grouped", "drives": 24, "scheme": "8+2", "fill_bytes": 512 << 20, "run_sec": 100.0,
			"healthy_mib_s": 5.0, "client_drive_sec_per_sec": 10.0, "client_rebuild_drive_sec_per_sec": 0.5}
		if rebuilt > 0 {
			run["rebuilt_bytes"] = rebuilt
		}
		b, _ := json.Marshal(map[string]any{"command": "poolfs bench rebuild --drives 24 --unit 256K", "runs": []any{run}})
		f := filepath.Join(dir, fmt.Sprintf("r%d.json", rebuilt))
		if err := os.WriteFile(f, b, 0o644); err != nil {
			t.Fatal(err)
		}
		out := runRoot(t, "plan", "rebuild", "--from-bench", f)
		m := regexp.MustCompile(`100\.0s\s+([0-9.]+)s`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no prediction in:\n%s", out)
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		return v
	}
	mean, small, large := predict(0), predict(15<<20), predict(30<<20)
	if !(small < large) || small == mean && large == mean {
		t.Fatalf("predicted %gs with the mean fill, %gs for 15 MiB rebuilt, %gs for 30 MiB: the rebuilt bytes are not taken", mean, small, large)
	}
}
