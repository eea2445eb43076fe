package recovery

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"poolfs/internal/placement"
)

// Scenario files (testdata/*.txt) describe a pool, its stripes and what
// happens to its drives, and show the rebuild plans that follow, in a form a
// storage engineer can read and extend without reading Go:
//
//	# comment
//	command args
//	----
//	<output, compared with what the code prints, up to a blank line>
//
// Run `go test ./internal/recovery/ -run TestScenarios -rewrite` to rewrite
// the outputs from the code (then read the diff). `expect` lines are
// assertions and fail the test even under -rewrite.
//
// Commands:
//
//	pool K+M drives=N [pgs=P] [layout=grouped spares=S] [domains=AxB]
//	    drives d00..d(N-1), all up; domains AxB = A servers of B drives
//	stripes N [k=K w=W]   N committed stripes written at the current epoch;
//	                with w, narrow stripes of scheme K+(W-K) on the first W
//	                drives of their PG (k=1: mirrors of W copies)
//	stripe INO/S pg=P drives=dAA,dBB,...   one stripe placed by hand
//	fail dNN...     drives fail (lost; rebuilt); the map moves to a new epoch
//	down dNN...     drives go down: unreachable, not failed (not rebuilt)
//	up dNN...       drives come back up       add dNN   a new empty drive
//	plan [show=N]   plan the work at the current epoch; print N tasks
//	apply           run the last plan (every task succeeds), then check
//	rewrite INO/S   a client rewrote the stripe: its generation changes
//	check           classify every stripe (healthy, degraded, critical...)
//	expect METRIC <=|>=|== VALUE
//	    tasks, critical (tasks with M lost), copies, unrecoverable, blocked,
//	    waiting (need a down drive back), unavailable (stripes on down drives),
//	    writes-on-dNN, reads-on-dNN (fragments the plan writes to or
//	    reads from that drive),
//	    read-balance (busiest reading drive / mean over drives that read),
//	    io-balance (the same for reads plus writes: what sets the time),
//	    healthy-all (1 if every stripe is healthy), domain-ok (1 if no PG
//	    of any stripe has more than M fragments in one server)
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
	pool    placement.Pool
	down    map[placement.DriveID]bool
	pm      *placement.PGMap
	stripes []Stripe
	plan    *Plan
	gen     uint64
}

func runScenario(t *testing.T, file string) {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	var out []string
	s := &scenario{}
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			out = append(out, line)
			continue
		}
		if i+1 >= len(lines) || lines[i+1] != "----" {
			t.Fatalf("%s:%d: command %q not followed by ----", file, i+1, line)
		}
		at := i + 1
		i += 2
		var want []string
		for ; i < len(lines) && lines[i] != ""; i++ {
			want = append(want, lines[i])
		}
		i-- // the blank line is echoed by the loop
		got, err := s.run(line)
		if err != nil && strings.HasPrefix(line, "expect") {
			t.Errorf("%s:%d: %v", file, at, err)
			got = []string{"FAILED: " + err.Error()}
		} else if err != nil {
			t.Fatalf("%s:%d: %s: %v", file, at, line, err)
		}
		if !*rewrite && strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s:%d: %s:\ngot:\n%s\nwant:\n%s", file, at, line, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		out = append(out, line, "----")
		out = append(out, got...)
	}
	if *rewrite {
		if err := os.WriteFile(file, []byte(strings.Join(out, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func (s *scenario) input() Input {
	up := map[placement.DriveID]bool{}
	for _, d := range s.pool.Drives {
		if !d.Out {
			up[d.ID] = true
		}
	}
	return Input{K: s.pool.K, M: s.pool.M, Sets: s.pm.Sets, Up: up, Down: s.down, Stripes: s.stripes}
}

// remap computes the placement of the new epoch; as the map authority
// does, it carries the grouped layout's spare assignments forward.
func (s *scenario) remap() error {
	if s.pm != nil {
		s.pool.SpareFor = s.pm.SpareFor
	}
	pm, err := s.pool.Map()
	s.pm = pm
	return err
}

func (s *scenario) run(line string) ([]string, error) {
	f := strings.Fields(line)
	args := map[string]string{}
	for _, a := range f[1:] {
		if k, v, ok := strings.Cut(a, "="); ok {
			args[k] = v
		}
	}
	switch f[0] {
	case "pool":
		return s.newPool(f[1], args)
	case "stripes":
		n, err := strconv.Atoi(f[1])
		if err != nil {
			return nil, err
		}
		k, _ := strconv.Atoi(args["k"])
		w, _ := strconv.Atoi(args["w"])
		first := len(s.stripes)
		for j := first; j < first+n; j++ {
			ino, st := uint64(100+j/64), uint64(j%64)
			pg := placement.PGOf(s.pool.ID, ino, st, s.pool.PGs)
			s.gen++
			set := s.pm.Sets[pg]
			if w > 0 {
				set = set[:w]
			}
			s.stripes = append(s.stripes, Stripe{Ino: ino, Stripe: st, Gen: s.gen, PG: pg, Drives: slices.Clone(set), K: k})
		}
		return []string{fmt.Sprintf("%d stripes", len(s.stripes))}, nil
	case "stripe":
		ino, st, err := parseRef(f[1])
		if err != nil {
			return nil, err
		}
		pg, err := strconv.Atoi(args["pg"])
		if err != nil {
			return nil, err
		}
		var ds []placement.DriveID
		for _, d := range strings.Split(args["drives"], ",") {
			id, err := placement.ParseDriveID(d)
			if err != nil {
				return nil, err
			}
			ds = append(ds, id)
		}
		s.gen++
		s.stripes = append(s.stripes, Stripe{Ino: ino, Stripe: st, Gen: s.gen, PG: uint32(pg), Drives: ds})
		return []string{fmt.Sprintf("stripe %d/%d pg %d on %v", ino, st, pg, ds)}, nil
	case "fail", "down", "up":
		for _, a := range f[1:] {
			id, err := placement.ParseDriveID(a)
			if err != nil {
				return nil, err
			}
			for j := range s.pool.Drives {
				if s.pool.Drives[j].ID == id {
					s.pool.Drives[j].Out = f[0] != "up"
				}
			}
			if s.down == nil {
				s.down = map[placement.DriveID]bool{}
			}
			s.down[id] = f[0] == "down"
		}
		return s.remapSummary()
	case "add":
		id, err := placement.ParseDriveID(f[1])
		if err != nil {
			return nil, err
		}
		s.pool.Drives = append(s.pool.Drives, placement.Drive{ID: id, Weight: 1, Domain: domainFor(args, len(s.pool.Drives))})
		return s.remapSummary()
	case "plan":
		p := Make(s.input())
		s.plan = &p
		show, _ := strconv.Atoi(args["show"])
		return describePlan(&p, s.pool.M, show), nil
	case "apply":
		if s.plan == nil {
			return nil, fmt.Errorf("no plan")
		}
		applied := 0
		for _, t := range s.plan.Tasks {
			for j := range s.stripes {
				st := &s.stripes[j]
				if st.Ino == t.Stripe.Ino && st.Stripe == t.Stripe.Stripe {
					if st.Gen != t.Stripe.Gen {
						continue // CAS lost: a client rewrote it
					}
					st.Drives = t.NewDrives()
					applied++
				}
			}
		}
		s.plan = nil
		return append([]string{fmt.Sprintf("applied %d tasks", applied)}, describeHealth(Check(s.input()))), nil
	case "rewrite":
		ino, st, err := parseRef(f[1])
		if err != nil {
			return nil, err
		}
		for j := range s.stripes {
			if s.stripes[j].Ino == ino && s.stripes[j].Stripe == st {
				s.gen++
				s.stripes[j].Gen = s.gen
				s.stripes[j].Drives = slices.Clone(s.pm.Sets[s.stripes[j].PG][:len(s.stripes[j].Drives)])
				return []string{fmt.Sprintf("stripe %d/%d rewritten on %v", ino, st, s.stripes[j].Drives)}, nil
			}
		}
		return nil, fmt.Errorf("no stripe %s", f[1])
	case "check":
		return []string{describeHealth(Check(s.input()))}, nil
	case "expect":
		return s.expect(f[1:])
	}
	return nil, fmt.Errorf("unknown command %q", f[0])
}

func parseRef(s string) (uint64, uint64, error) {
	a, b, _ := strings.Cut(s, "/")
	ino, err := strconv.ParseUint(a, 10, 64)
	if err != nil {
		return 0, 0, err
	}
	st, err := strconv.ParseUint(b, 10, 64)
	return ino, st, err
}

func domainFor(args map[string]string, i int) []string {
	d := args["domains"]
	if d == "" {
		return nil
	}
	_, b, _ := strings.Cut(d, "x")
	per, _ := strconv.Atoi(b)
	if per <= 0 {
		return nil
	}
	return []string{fmt.Sprintf("srv%d", i/per)}
}

func (s *scenario) newPool(scheme string, args map[string]string) ([]string, error) {
	k, m := 0, 0
	if _, err := fmt.Sscanf(scheme, "%d+%d", &k, &m); err != nil {
		return nil, err
	}
	n, err := strconv.Atoi(args["drives"])
	if err != nil {
		return nil, err
	}
	s.pool = placement.Pool{ID: 1, K: k, M: m, PGs: placement.DefaultPGs(n, k+m)}
	if v := args["pgs"]; v != "" {
		if s.pool.PGs, err = strconv.Atoi(v); err != nil {
			return nil, err
		}
	}
	if args["layout"] == "grouped" {
		s.pool.Layout = placement.Grouped
		s.pool.Spares, _ = strconv.Atoi(args["spares"])
	}
	for i := 0; i < n; i++ {
		s.pool.Drives = append(s.pool.Drives, placement.Drive{ID: placement.DriveID(i), Weight: 1, Domain: domainFor(args, i)})
	}
	s.stripes, s.plan, s.down, s.pm = nil, nil, nil, nil
	if err := s.remap(); err != nil {
		return nil, err
	}
	return []string{fmt.Sprintf("pool %d+%d %s, %d drives, %d PGs", k, m, s.pool.Layout, n, s.pool.PGs)}, nil
}

func (s *scenario) remapSummary() ([]string, error) {
	if err := s.remap(); err != nil {
		return nil, err
	}
	var down []string
	for _, d := range s.pool.Drives {
		switch {
		case s.down[d.ID]:
			down = append(down, d.ID.String()+"(down)")
		case d.Out:
			down = append(down, d.ID.String())
		}
	}
	if len(down) == 0 {
		down = []string{"none"}
	}
	return []string{fmt.Sprintf("%d drives, not up: %s", len(s.pool.Drives), strings.Join(down, " ")),
		describeHealth(Check(s.input()))}, nil
}

func describeHealth(h Health) string {
	out := fmt.Sprintf("stripes %d: healthy %d, degraded %d, critical %d, lost %d, misplaced %d",
		h.Stripes, h.Healthy, h.Degraded, h.Critical, h.Lost, h.Misplaced)
	if h.Unavailable > 0 {
		out += fmt.Sprintf("; on down drives %d", h.Unavailable)
	}
	return out
}

func describePlan(p *Plan, m, show int) []string {
	by := p.ByLost()
	var parts []string
	for lost := m; lost >= 0; lost-- {
		if by[lost] > 0 {
			name := fmt.Sprintf("%d lost", lost)
			if lost == 0 {
				name = "copies"
			}
			parts = append(parts, fmt.Sprintf("%s %d", name, by[lost]))
		}
	}
	if len(parts) == 0 {
		parts = []string{"nothing to do"}
	}
	out := []string{fmt.Sprintf("tasks %d: %s; unrecoverable %d, blocked %d",
		len(p.Tasks), strings.Join(parts, ", "), len(p.Unrecoverable), len(p.Blocked))}
	if len(p.Waiting) > 0 {
		out[0] += fmt.Sprintf(", waiting for a down drive %d", len(p.Waiting))
	}
	if len(p.Tasks) > 0 {
		out = append(out, "reads per drive: "+spread(p.Reads), "writes per drive: "+spread(p.Writes),
			"I/O per drive: "+spread(p.IO()))
	}
	for j := 0; j < show && j < len(p.Tasks); j++ {
		t := p.Tasks[j]
		var w, r []string
		for x, i := range t.Indexes {
			w = append(w, fmt.Sprintf("%d->%v", i, t.Targets[x]))
		}
		for _, src := range t.Sources {
			r = append(r, fmt.Sprintf("%d@%v", src.Index, src.Drive))
		}
		kind := fmt.Sprintf("lost %d", t.Lost)
		if t.Copy() {
			kind = "copy"
		}
		out = append(out, fmt.Sprintf("  %s pg %d %s: write %s; read %s", t.Stripe, t.Stripe.PG, kind,
			strings.Join(w, " "), strings.Join(r, " ")))
	}
	for _, st := range p.Unrecoverable {
		out = append(out, fmt.Sprintf("  unrecoverable: file %d stripe %d", st.Ino, st.Stripe))
	}
	for j, st := range p.Blocked {
		if j == 10 {
			out = append(out, fmt.Sprintf("  ... and %d more blocked", len(p.Blocked)-j))
			break
		}
		out = append(out, fmt.Sprintf("  blocked: %s pg %d", st, st.PG))
	}
	for j, st := range p.Waiting {
		if j == 10 {
			out = append(out, fmt.Sprintf("  ... and %d more waiting", len(p.Waiting)-j))
			break
		}
		out = append(out, fmt.Sprintf("  waiting: %s pg %d", st, st.PG))
	}
	return out
}

// spread summarises per-drive counts: drives, min..max, busiest/mean.
func spread(c map[placement.DriveID]int) string {
	if len(c) == 0 {
		return "none"
	}
	lo, hi, sum := -1, 0, 0
	for _, n := range c {
		sum += n
		hi = max(hi, n)
		if lo < 0 || n < lo {
			lo = n
		}
	}
	mean := float64(sum) / float64(len(c))
	return fmt.Sprintf("%d drives, %d..%d, busiest/mean %.2f", len(c), lo, hi, float64(hi)/mean)
}

// balance is the busiest drive's count over the mean of the drives counted.
func balance(c map[placement.DriveID]int) float64 {
	sum, hi := 0, 0
	for _, n := range c {
		sum += n
		hi = max(hi, n)
	}
	if sum == 0 {
		return 0
	}
	return float64(hi) / (float64(sum) / float64(len(c)))
}

func (s *scenario) domainOK() bool {
	for _, st := range s.stripes {
		per := map[string]int{}
		for _, id := range st.Drives {
			for _, d := range s.pool.Drives {
				if d.ID == id && len(d.Domain) > 0 {
					per[d.Domain[0]]++
					if per[d.Domain[0]] > s.pool.M {
						return false
					}
				}
			}
		}
	}
	return true
}

func (s *scenario) expect(f []string) ([]string, error) {
	if len(f) != 3 {
		return nil, fmt.Errorf("expect METRIC OP VALUE")
	}
	want, err := strconv.ParseFloat(f[2], 64)
	if err != nil {
		return nil, err
	}
	var got float64
	p := s.plan
	needPlan := func() error {
		if p == nil {
			return fmt.Errorf("expect %s: no plan", f[0])
		}
		return nil
	}
	switch {
	case slices.Contains([]string{"tasks", "critical", "copies", "unrecoverable", "blocked", "read-balance", "io-balance", "waiting"}, f[0]),
		strings.HasPrefix(f[0], "writes-on-"), strings.HasPrefix(f[0], "reads-on-"):
		if err := needPlan(); err != nil {
			return nil, err
		}
	}
	switch f[0] {
	case "tasks":
		got = float64(len(p.Tasks))
	case "critical":
		got = float64(p.ByLost()[s.pool.M])
	case "copies":
		got = float64(p.ByLost()[0])
	case "unrecoverable":
		got = float64(len(p.Unrecoverable))
	case "blocked":
		got = float64(len(p.Blocked))
	case "waiting":
		got = float64(len(p.Waiting))
	case "unavailable":
		got = float64(Check(s.input()).Unavailable)
	case "read-balance":
		got = balance(p.Reads)
	case "io-balance":
		got = balance(p.IO())
	case "healthy-all":
		h := Check(s.input())
		got = 0
		if h.Healthy == h.Stripes {
			got = 1
		}
	case "domain-ok":
		got = 0
		if s.domainOK() {
			got = 1
		}
	default:
		name, drive, _ := strings.Cut(f[0], "-on-")
		id, err := placement.ParseDriveID(drive)
		switch {
		case err == nil && name == "writes":
			got = float64(p.Writes[id])
		case err == nil && name == "reads":
			got = float64(p.Reads[id])
		default:
			return nil, fmt.Errorf("unknown metric %q", f[0])
		}
	}
	ok := false
	switch f[1] {
	case "<=":
		ok = got <= want
	case ">=":
		ok = got >= want
	case "==":
		ok = got == want
	default:
		return nil, fmt.Errorf("unknown operator %q", f[1])
	}
	if !ok {
		return nil, fmt.Errorf("expect %s %s %s: got %.4g", f[0], f[1], f[2], got)
	}
	return []string{"ok"}, nil
}
