package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"poolfs/internal/bench"
	"poolfs/internal/netlab"
)

// TestScalingMetaBench measures aggregate creates, stats and removes from
// 1, 2 and 4 client hosts through 1, 2 and 4 metadata servers on one
// PostgreSQL, and pgbench's simple-update transactions against the same
// server at the same client count, alternately (metaPair): pgbench, then
// mdtest, metaRounds times per point. It runs only under bench/scaling.sh.
func TestScalingMetaBench(t *testing.T) {
	if os.Getenv("POOLFS_SCALING") == "" {
		t.Skip("a benchmark: run bench/scaling.sh")
	}
	cfg := scalingFromEnv(t)
	ctx := scalingContext()
	if ctx.Err() != nil {
		t.Fatal("interrupted")
	}
	pgbench, err := exec.LookPath("pgbench")
	if err != nil {
		if m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pgbench"); len(m) > 0 {
			pgbench, err = m[len(m)-1], nil
		}
	}
	if err != nil {
		t.Fatal("no pgbench: install postgresql (scripts/deps.sh test)")
	}
	const tasksPer, maxHosts, maxMeta = 4, 4, 4
	lab := netlab.New(t)
	pg, mg, st := lab.AddHost("pg"), lab.AddHost("mgmt"), lab.AddHost("s1")
	var metas, clients []*netlab.Host
	for i := range maxMeta {
		metas = append(metas, lab.AddHost(fmt.Sprintf("m%d", i+1)))
	}
	for i := range maxHosts {
		clients = append(clients, lab.AddHost(fmt.Sprintf("c%d", i+1)))
	}
	root := t.TempDir()
	dir := func(host string) string { return filepath.Join(root, host) }
	shm := scalingMemDir(t)

	db := startLabPostgres(t, pg, mg)
	token := createLabCluster(t, mg, dir("mgmt"), mg.Addr(9401))
	startDaemon(t, mg, "mgmt", "poolfs mgmt: serving", "-c", dir("mgmt"), "mgmt", "--db", db, "--listen", mg.Addr(9401))
	for _, h := range metas {
		startDaemon(t, h, h.Name, "poolfs meta: serving", "-c", dir(h.Name), "meta", "--join-file", token, "--db", db, "--listen", h.Addr(9402))
	}
	args := []string{"-c", dir("s1"), "storage", "--join-file", token, "--server", "s1", "--listen", st.Addr(9500), "--drive-size", "1G", "--no-direct-io"}
	for d := range 4 {
		args = append(args, "--drive", filepath.Join(shm, "s1", fmt.Sprintf("d%d", d)))
	}
	startDaemon(t, st, "s1", "poolfs storage s1: serving", args...)
	runOn(t, clients[0], "-c", dir("join"), "cluster", "join", "--token-file", token)
	runOn(t, clients[0], "-c", dir("join"), "cluster", "pool", "default", "--scheme", "2+1", "--unit", "64K")
	// Client host i talks to metadata server i mod M: its directory names
	// that server (the "meta" of cluster.json, which a joined machine leaves
	// empty to take the first of the map). Every task sees its host's
	// directory at one path, bind-mounted in a mount namespace of its own.
	clientDir := func(i, m int) string {
		d := dir(fmt.Sprintf("c%d-m%d", i+1, m))
		if _, err := os.Stat(d); err == nil {
			return d
		}
		if err := os.CopyFS(d, os.DirFS(dir("join"))); err != nil {
			t.Fatal(err)
		}
		var info map[string]any
		b, err := os.ReadFile(filepath.Join(d, "cluster.json"))
		if err == nil {
			err = json.Unmarshal(b, &info)
		}
		if err != nil {
			t.Fatal(err)
		}
		info["meta"] = metas[i%m].Addr(9402)
		if b, err = json.Marshal(info); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "cluster.json"), b, 0o600); err != nil {
			t.Fatal(err)
		}
		return d
	}
	seen := dir("client")
	if err := os.Mkdir(seen, 0o700); err != nil {
		t.Fatal(err)
	}
	tps := regexp.MustCompile(`tps = ([0-9.]+)`)
	if o, err := clients[0].Command(pgbench, "-i", "-q", "-s", "1", db).CombinedOutput(); err != nil {
		t.Fatalf("pgbench -i: %v\n%s", err, o)
	}
	pgb := func(n int) float64 {
		o, err := clients[0].Command(pgbench, "-n", "-b", "simple-update", "-c", strconv.Itoa(n), "-j", strconv.Itoa(n),
			"-T", strconv.Itoa(metaSeconds), db).CombinedOutput()
		mm := tps.FindSubmatch(o)
		if err != nil || mm == nil {
			t.Fatalf("pgbench: %v\n%s", err, o)
		}
		v, _ := strconv.ParseFloat(string(mm[1]), 64)
		return v
	}
	var points []metaPoint
	for _, pt := range cfg.MetaPoints {
		hosts, m := pt[0], pt[1]
		var dirs []string
		for i := range hosts {
			dirs = append(dirs, clientDir(i, m))
		}
		launcher := bench.Procs{Exe: binary, Stderr: os.Stderr, Prefix: func(rank int) []string {
			h := rank % hosts
			return []string{"nsenter", "--net=" + filepath.Join("/run/netns", clients[h].NS), "--",
				"unshare", "--mount", "--propagation", "private", "sh", "-c", `mount --bind "$0" "$1" && shift && exec "$@"`, dirs[h], seen}
		}}
		n := hosts * tasksPer
		mdtest := func(round, items int) metaPair {
			task := bench.MDTestTask{Target: bench.Target{API: bench.APIPoolfs, Dir: fmt.Sprintf("/md-%d-%d-%d", hosts, m, round), Cluster: seen},
				Items: items, Dirs: 1, Unique: true, Files: true, Iterations: 1, Seed: 0x5ca1e, Name: "mdtest"}
			res, err := bench.RunMDTest(ctx, bench.MDTestOptions{Task: task, Tasks: []int{n}, Launcher: launcher})
			if err != nil {
				t.Fatalf("%d client hosts, %d meta servers: %v", hosts, m, err)
			}
			pr := metaPair{Items: items, Rate: map[string]float64{}}
			for _, ph := range res.Runs[0].Phases {
				pr.Rate[ph.Phase] = ph.Rate.Mean
				if ph.Phase == "file-create" && len(ph.Iterations) > 0 {
					pr.CreateSeconds = ph.Iterations[0].Seconds
				}
			}
			return pr
		}
		// A warm-up run, not counted, gives the rate that sizes the
		// first counted create phase; each later one is sized by the
		// rate of the one before.
		rate := mdtest(0, metaWarmItems).Rate["file-create"]
		p := metaPoint{Hosts: hosts, Meta: m, Clients: n}
		for r := 1; r <= metaRounds; r++ {
			tps := pgb(n) // right before the create phase it is compared with
			pr := mdtest(r, metaItems(rate, n))
			pr.PGBench = tps
			rate = pr.Rate["file-create"]
			t.Logf("%d hosts, %d meta, pair %d: pgbench %.0f tps, then creates %.0f/s over %.1f s (%d per task): %.2f",
				hosts, m, r, tps, rate, pr.CreateSeconds, pr.Items, rate/tps)
			p.Pairs = append(p.Pairs, pr)
		}
		p.summarize()
		points = append(points, p)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Aggregate metadata rates, operations/s, %s: %d tasks per client host, each in a directory of its own (mdtest -F -u, poolfs API);\n", stamp(), tasksPer)
	fmt.Fprintf(&b, "per point %d pairs of pgbench -b simple-update -T %d with as many clients against the same PostgreSQL, then mdtest with its create phase sized to about %d s;\n", metaRounds, metaSeconds, metaSeconds)
	b.WriteString("medians of the pairs; creates / pgbench: median of the pairs' ratios (lowest–highest)\n\n")
	b.WriteString("| client hosts | meta servers | clients | creates | stats | removes | pgbench tps | creates / pgbench |\n|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, p := range points {
		fmt.Fprintf(&b, "| %d | %d | %d | %.0f | %.0f | %.0f | %.0f | %.2f (%.2f–%.2f) |\n", p.Hosts, p.Meta, p.Clients,
			p.Rate["file-create"], p.Rate["file-stat"], p.Rate["file-remove"], p.PGBench, p.Ratio, p.RatioMin, p.RatioMax)
	}
	fmt.Print(b.String())
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfg.Out, "scaling-meta.md"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	js, _ := json.MarshalIndent(points, "", "  ")
	if err := os.WriteFile(filepath.Join(cfg.Out, "scaling-meta.json"), append(js, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}
