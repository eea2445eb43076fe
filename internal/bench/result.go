package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"sort"
	"time"
)

// Schema and SchemaVersion identify result files (docs/bench.md). The
// version changes only when a field changes meaning or is removed; new
// fields may appear within a version and readers ignore unknown ones.
const (
	Schema        = "poolfs-bench"
	SchemaVersion = 1
)

// MiB is the unit of every bandwidth: MiB/s = bytes / 2^20 / seconds.
const MiB = 1 << 20

// Result is one result file.
type Result struct {
	Schema  string    `json:"schema"`
	Version int       `json:"version"`
	Kind    string    `json:"kind"`  // "ior", "mdtest" or "survey"
	Label   string    `json:"label"` // what was measured, e.g. "poolfs" or "local ext4"
	Started time.Time `json:"started"`
	Host    Host      `json:"host"`

	IOR    *IORResult    `json:"ior,omitempty"`
	MDTest *MDTestResult `json:"mdtest,omitempty"`
	Survey *SurveyResult `json:"survey,omitempty"`
}

// Host describes where the benchmark ran.
type Host struct {
	Hostname string `json:"hostname"`
	OS       string `json:"os"`
	Arch     string `json:"arch"`
	CPUs     int    `json:"cpus"`
	Go       string `json:"go"`
	Poolfs   string `json:"poolfs"` // module version or VCS revision, "" if unknown
}

// ThisHost describes the machine and binary running now.
func ThisHost() Host {
	h := Host{OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(), Go: runtime.Version()}
	h.Hostname, _ = os.Hostname()
	if bi, ok := debug.ReadBuildInfo(); ok {
		h.Poolfs = bi.Main.Version
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				h.Poolfs = s.Value
			}
		}
	}
	return h
}

// NewResult starts a result of a kind.
func NewResult(kind, label string, started time.Time, host Host) *Result {
	return &Result{Schema: Schema, Version: SchemaVersion, Kind: kind, Label: label, Started: started.UTC(), Host: host}
}

// WriteJSON writes r as indented JSON.
func (r *Result) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteFile writes r to path.
func (r *Result) WriteFile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := r.WriteJSON(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ReadResult reads a result file, refusing other schemas and newer versions.
func ReadResult(path string) (*Result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrUsage, path, err)
	}
	if r.Schema != Schema {
		return nil, fmt.Errorf("%w: %s is not a poolfs bench result (schema %q)", ErrUsage, path, r.Schema)
	}
	if r.Version < 1 || r.Version > SchemaVersion {
		return nil, fmt.Errorf("%w: %s has schema version %d; this poolfs reads up to %d", ErrUsage, path, r.Version, SchemaVersion)
	}
	return &r, nil
}

// Stat is the minimum, mean and maximum over iterations.
type Stat struct {
	Min  float64 `json:"min"`
	Mean float64 `json:"mean"`
	Max  float64 `json:"max"`
}

func statOf(v []float64) Stat {
	if len(v) == 0 {
		return Stat{}
	}
	s := Stat{Min: math.Inf(1), Max: math.Inf(-1)}
	for _, x := range v {
		s.Min, s.Max = min(s.Min, x), max(s.Max, x)
		s.Mean += x
	}
	s.Mean /= float64(len(v))
	return s
}

// PhaseResult is one phase (write, read, file-create, ...) over all
// iterations.
type PhaseResult struct {
	Phase      string       `json:"phase"`
	Iterations []IterResult `json:"iterations"`
	BW         Stat         `json:"bw_mib_s"`  // MiB/s
	Rate       Stat         `json:"ops_per_s"` // IOPS (ior) or operations per second (mdtest)
}

// IterResult is one phase of one iteration, all tasks together.
type IterResult struct {
	Iter    int     `json:"iter"`
	Bytes   int64   `json:"bytes"`
	Ops     int64   `json:"ops"`
	Seconds float64 `json:"seconds"` // earliest task start to latest task end
	BW      float64 `json:"bw_mib_s"`
	Rate    float64 `json:"ops_per_s"`
	// TaskSeconds is the fastest and slowest single task's own time.
	FastestTask float64 `json:"fastest_task_s"`
	SlowestTask float64 `json:"slowest_task_s"`
}

// Summarize turns the samples of a run of n tasks into phase results, in
// the order of phases. Every (iteration, phase) must have one sample from
// each task. The phase time is from the earliest start to the latest end
// (at least 1 ns), bandwidth is bytes/MiB over it.
func Summarize(samples []Sample, n, iterations int, phases []string) ([]PhaseResult, error) {
	type key struct {
		iter  int
		phase string
	}
	groups := map[key][]Sample{}
	for _, s := range samples {
		k := key{s.Iter, s.Phase}
		groups[k] = append(groups[k], s)
	}
	var out []PhaseResult
	for _, ph := range phases {
		pr := PhaseResult{Phase: ph}
		var bws, rates []float64
		for it := range iterations {
			g := groups[key{it, ph}]
			if len(g) != n {
				return nil, fmt.Errorf("bench: phase %s iteration %d: %d samples from %d tasks", ph, it, len(g), n)
			}
			sort.Slice(g, func(i, j int) bool { return g[i].Rank < g[j].Rank })
			ir := IterResult{Iter: it, FastestTask: math.Inf(1)}
			first, last := g[0].Start, g[0].End
			for _, s := range g {
				first, last = min(first, s.Start), max(last, s.End)
				ir.Bytes += s.Bytes
				ir.Ops += s.Ops
				d := float64(s.End-s.Start) / 1e9
				ir.FastestTask, ir.SlowestTask = min(ir.FastestTask, d), max(ir.SlowestTask, d)
			}
			ir.Seconds = float64(max(last-first, 1)) / 1e9
			ir.BW = float64(ir.Bytes) / MiB / ir.Seconds
			ir.Rate = float64(ir.Ops) / ir.Seconds
			pr.Iterations = append(pr.Iterations, ir)
			bws, rates = append(bws, ir.BW), append(rates, ir.Rate)
		}
		pr.BW, pr.Rate = statOf(bws), statOf(rates)
		out = append(out, pr)
	}
	return out, nil
}
