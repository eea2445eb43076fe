package placement

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Scenario files (testdata/*.txt) describe pools and what happens to them,
// in a form a storage engineer can read and extend without reading Go:
//
//	# comment
//	pool 8+2 drives=60 domains=6x10
//	----
//	<output, compared with what the code prints>
//
// Each command is one line, then a line "----", then its expected output up
// to a blank line. Run `go test ./internal/placement/ -run TestScenarios
// -rewrite` to rewrite the expected outputs from the code (then read the
// diff). `expect` lines are assertions on the last change and fail the test
// even under -rewrite.
//
// Commands:
//
//	pool K+M drives=N [pgs=P] [weights=W1,W2,...] [domains=AxBx...] [layout=grouped spares=S]
//	    a pool of drives d00..d(N-1); weights are assigned cyclically; domains
//	    AxB is A servers of B drives (AxBxC: A servers × B enclosures × C drives);
//	    pgs defaults to DefaultPGs.
//	out dNN...      mark drives Out          in dNN...  bring them back
//	add dNN [weight=W] [domain=srv1/enc0]    remove dNN...
//	pg N            the drives of PG N       loads      fragment slots per drive
//	expect METRIC <=|>=|== VALUE[%]
//	    metrics of the last change: moved-slots (fraction of all slots),
//	    changed-pgs, max-replaced, degraded; of the current map: balance
//	    (max share / weight share), min-share.
var rewrite = flag.Bool("rewrite", false, "rewrite the expected outputs of testdata/*.txt")

func TestScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenario files: %v", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			t.Parallel()
			runScenario(t, file)
		})
	}
}

type scenario struct {
	pool *Pool
	m    *PGMap
	mv   Movement
}

func runScenario(t *testing.T, file string) {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	var out []string
	var s scenario
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			out = append(out, line)
			continue
		}
		if i+1 >= len(lines) || lines[i+1] != "----" {
			t.Fatalf("%s:%d: command %q not followed by ----", file, i+1, line)
		}
		cmdLine := i + 1
		i += 2
		var want []string
		for ; i < len(lines) && strings.TrimSpace(lines[i]) != ""; i++ {
			want = append(want, lines[i])
		}
		i-- // let the loop see the blank line
		got, err := s.run(line)
		if err != nil {
			got = "error: " + err.Error()
		}
		gotLines := strings.Split(got, "\n")
		if strings.HasPrefix(line, "expect") && got != "ok" {
			t.Errorf("%s:%d: %s: %s", file, cmdLine, line, got)
		}
		if !*rewrite && !slices.Equal(gotLines, want) {
			t.Errorf("%s:%d: %s\ngot:\n%s\nwant:\n%s", file, cmdLine, line, got, strings.Join(want, "\n"))
		}
		out = append(out, line, "----")
		out = append(out, gotLines...)
	}
	if *rewrite {
		if err := os.WriteFile(file, []byte(strings.Join(out, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// run executes one command and returns its output (no blank lines).
func (s *scenario) run(line string) (string, error) {
	f := strings.Fields(line)
	cmd, args := f[0], f[1:]
	if cmd != "pool" && s.pool == nil {
		return "", fmt.Errorf("%s before pool", cmd)
	}
	switch cmd {
	case "pool":
		p, err := parsePoolCmd(args)
		if err != nil {
			return "", err
		}
		s.pool, s.m, s.mv = p, nil, Movement{}
		return s.remap(false)
	case "out", "in":
		for _, a := range args {
			id, err := ParseDriveID(a)
			if err != nil {
				return "", err
			}
			if !slices.ContainsFunc(s.pool.Drives, func(d Drive) bool { return d.ID == id }) {
				return "", fmt.Errorf("no drive %v", id)
			}
			s.pool = setOut(s.pool, id, cmd == "out")
		}
		return s.remap(true)
	case "add":
		if len(args) == 0 {
			return "", fmt.Errorf("add needs a drive id")
		}
		id, err := ParseDriveID(args[0])
		if err != nil {
			return "", err
		}
		d := Drive{ID: id, Weight: 1}
		for _, a := range args[1:] {
			k, v, _ := strings.Cut(a, "=")
			switch k {
			case "weight":
				if d.Weight, err = strconv.ParseFloat(v, 64); err != nil {
					return "", err
				}
			case "domain":
				d.Domain = strings.Split(v, "/")
			default:
				return "", fmt.Errorf("add: unknown argument %q", a)
			}
		}
		s.pool = clonePool(s.pool)
		s.pool.Drives = append(s.pool.Drives, d)
		return s.remap(true)
	case "remove":
		q := clonePool(s.pool)
		for _, a := range args {
			id, err := ParseDriveID(a)
			if err != nil {
				return "", err
			}
			q.Drives = slices.DeleteFunc(q.Drives, func(d Drive) bool { return d.ID == id })
		}
		s.pool = q
		return s.remap(true)
	case "pg":
		n, err := strconv.Atoi(strings.Join(args, ""))
		if err != nil {
			return "", fmt.Errorf("pg wants a number: %v", err)
		}
		set, err := s.m.Drives(uint32(n))
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("pg %d: %s", n, idsString(set)), nil
	case "loads":
		load := s.m.DriveLoad()
		var b strings.Builder
		for i, d := range s.m.Pool.Drives {
			if i > 0 {
				b.WriteString(map[bool]string{true: "\n", false: " "}[i%10 == 0])
			}
			fmt.Fprintf(&b, "%v=%d", d.ID, load[d.ID])
		}
		return b.String(), nil
	case "expect":
		return s.expect(args)
	}
	return "", fmt.Errorf("unknown command %q", cmd)
}

// remap recomputes the map; with compare, it also reports the movement.
func (s *scenario) remap(compare bool) (string, error) {
	m, err := s.pool.Map()
	if err != nil {
		return "", err
	}
	var lines []string
	if compare && s.m != nil {
		if s.mv, err = Moves(s.m, m); err != nil {
			return "", err
		}
		lines = append(lines, fmt.Sprintf("moved: %d of %d slots (%.2f%%) in %d PGs, at most %d per PG",
			s.mv.MovedSlots, s.mv.Slots, 100*s.mv.MovedFraction(), s.mv.ChangedPGs, s.mv.MaxReplaced))
	} else {
		lines = append(lines, describePool(s.pool)...)
	}
	s.m = m
	lo, hi := shareRange(m)
	lines = append(lines, fmt.Sprintf("balance: %.3f (share/weight share %.3f..%.3f)", m.Balance(), lo, hi))
	if len(m.Degraded) > 0 {
		lines = append(lines, fmt.Sprintf("degraded: %d PGs", len(m.Degraded)))
	}
	return strings.Join(lines, "\n"), nil
}

func describePool(p *Pool) []string {
	lines := []string{fmt.Sprintf("pool %d: %d+%d %v, %d drives (%d in), %d PGs",
		p.ID, p.K, p.M, p.Layout, len(p.Drives), p.InPlacement(), p.PGs)}
	pl, err := p.Placer()
	if err != nil {
		return lines
	}
	if p.Layout == Grouped {
		var gs []string
		for _, g := range p.Groups() {
			gs = append(gs, g[0].String()+"-"+g[len(g)-1].String())
		}
		lines = append(lines, fmt.Sprintf("groups: %s; spares: %s; unused: %s",
			strings.Join(gs, " "), orNone(p.HotSpares()), orNone(p.Unused())))
		return lines
	}
	if len(pl.levels) == 0 {
		lines = append(lines, "no failure domains: distinct drives only")
	}
	for l, lv := range pl.levels {
		state := "not enforced (too few domains)"
		if slices.Contains(pl.enforced, l) {
			state = fmt.Sprintf("enforced: at most %d fragments of a PG per domain", pl.DomainLimit())
		}
		lines = append(lines, fmt.Sprintf("level %d: %d domains, %s", l, len(lv.names), state))
	}
	return lines
}

func orNone(ids []DriveID) string {
	if len(ids) == 0 {
		return "none"
	}
	return idsString(ids)
}

func (s *scenario) expect(args []string) (string, error) {
	if len(args) != 3 {
		return "", fmt.Errorf("expect METRIC OP VALUE, got %q", strings.Join(args, " "))
	}
	lo, hi := shareRange(s.m)
	metrics := map[string]float64{
		"moved-slots":  s.mv.MovedFraction(),
		"changed-pgs":  float64(s.mv.ChangedPGs),
		"max-replaced": float64(s.mv.MaxReplaced),
		"degraded":     float64(len(s.m.Degraded)),
		"balance":      hi,
		"min-share":    lo,
	}
	got, ok := metrics[args[0]]
	if !ok {
		return "", fmt.Errorf("unknown metric %q", args[0])
	}
	v := args[2]
	scale := 1.0
	if strings.HasSuffix(v, "%") {
		v, scale = strings.TrimSuffix(v, "%"), 0.01
	}
	want, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return "", err
	}
	want *= scale
	var pass bool
	switch args[1] {
	case "<=":
		pass = got <= want
	case ">=":
		pass = got >= want
	case "==":
		pass = got == want
	default:
		return "", fmt.Errorf("unknown operator %q", args[1])
	}
	if !pass {
		return fmt.Sprintf("FAILED: %s is %.4g", args[0], got), nil
	}
	return "ok", nil
}

func parsePoolCmd(args []string) (*Pool, error) {
	if len(args) == 0 {
		return nil, fmt.Errorf("pool K+M drives=N ...")
	}
	ks, ms, ok := strings.Cut(args[0], "+")
	k, err1 := strconv.Atoi(ks)
	m, err2 := strconv.Atoi(ms)
	if !ok || err1 != nil || err2 != nil {
		return nil, fmt.Errorf("bad scheme %q, want K+M", args[0])
	}
	kv := make(map[string]string)
	for _, a := range args[1:] {
		key, val, ok := strings.Cut(a, "=")
		if !ok {
			return nil, fmt.Errorf("bad argument %q, want key=value", a)
		}
		kv[key] = val
	}
	n, err := strconv.Atoi(kv["drives"])
	if err != nil {
		return nil, fmt.Errorf("drives=N: %v", err)
	}
	p := newPool(k, m, n)
	for key, val := range kv {
		switch key {
		case "drives":
		case "pgs":
			if p.PGs, err = strconv.Atoi(val); err != nil {
				return nil, err
			}
		case "weights":
			var ws []float64
			for _, w := range strings.Split(val, ",") {
				f, err := strconv.ParseFloat(w, 64)
				if err != nil {
					return nil, err
				}
				ws = append(ws, f)
			}
			withWeights(p, ws...)
		case "domains":
			var dims []int
			prod := 1
			for _, d := range strings.Split(val, "x") {
				x, err := strconv.Atoi(d)
				if err != nil || x < 1 {
					return nil, fmt.Errorf("bad domains %q", val)
				}
				dims, prod = append(dims, x), prod*x
			}
			if prod != n {
				return nil, fmt.Errorf("domains %s hold %d drives, pool has %d", val, prod, n)
			}
			withDomains(p, dims...)
		case "layout":
			if p.Layout, err = ParseLayout(val); err != nil {
				return nil, err
			}
		case "spares":
			if p.Spares, err = strconv.Atoi(val); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("unknown pool argument %q", key)
		}
	}
	return p, nil
}
