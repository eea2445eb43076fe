package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
