package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"poolfs/internal/bench"
	"poolfs/internal/netlab"
)

// scalingConfig is one run of the scaling benchmark (bench/scaling.sh sets
// it through the environment; docs/scaling.md explains the method).
type scalingConfig struct {
	Servers    []int    // storage server counts of the sweep
	ServerMbit int64    // each storage server's link, Mbit/s each way
	ClientMbit int64    // each client host's link
	Clients    int      // client hosts
	TasksPer   int      // IOR tasks per client host
	DrivesPer  int      // drives per storage server
	Model      string   // drive speed model of every drive
	Scale      float64  // its speed factor
	PerServer  int64    // bytes each task writes per storage server (weak scaling)
	Scheme     string   // pool scheme
	Unit       string   // stripe unit
	Cases      []string // IOR cases to run (scalingCases names)
	MetaPoints [][2]int // metadata points: (client hosts, metadata servers), each 1 to 4
	Out        string   // directory of the results
}

func scalingFromEnv(t *testing.T) scalingConfig {
	t.Helper()
	c := scalingConfig{Servers: []int{1, 2, 4, 6}, ServerMbit: 32, ClientMbit: 256, Clients: 2, TasksPer: 2,
		DrivesPer: 4, Model: "ssd", Scale: 0.005, PerServer: 16 << 20, Scheme: "2+1", Unit: "256K",
		Cases:      []string{"fpp", "shared"},
		MetaPoints: [][2]int{{1, 1}, {2, 2}, {4, 4}, {4, 1}},
		Out:        filepath.Join("..", "..", "bench", "out", "scaling")}
	env := func(name string, set func(string) error) {
		if v := os.Getenv("POOLFS_SCALING_" + name); v != "" {
			if err := set(v); err != nil {
				t.Fatalf("POOLFS_SCALING_%s=%s: %v", name, v, err)
			}
		}
	}
	env("SERVERS", func(v string) (err error) { c.Servers, err = bench.ParseIntList(v); return })
	env("SERVER_MBIT", func(v string) (err error) { c.ServerMbit, err = strconv.ParseInt(v, 10, 64); return })
	env("CLIENT_MBIT", func(v string) (err error) { c.ClientMbit, err = strconv.ParseInt(v, 10, 64); return })
	env("MB", func(v string) (err error) { c.PerServer, err = bench.ParseSize(v + "m"); return })
	env("SCALE", func(v string) (err error) { c.Scale, err = strconv.ParseFloat(v, 64); return })
	env("MODEL", func(v string) error { c.Model = v; return nil })
	env("OUT", func(v string) error { c.Out = v; return nil })
	env("CASES", func(v string) error {
		c.Cases = strings.Split(v, ",")
		for _, name := range c.Cases {
			if !slices.ContainsFunc(scalingCases, func(sc scalingCase) bool { return sc.name == name }) {
				return fmt.Errorf("case %q: want fpp or shared", name)
			}
		}
		return nil
	})
	env("META_POINTS", func(v string) (err error) { c.MetaPoints, err = parseMetaPoints(v); return })
	for _, n := range c.Servers {
		if n < 1 || n > 12 {
			t.Fatalf("POOLFS_SCALING_SERVERS: %d servers: want 1 to 12", n)
		}
	}
	return c
}

// scalingPoint is what one server count measured: MiB/s by case
// ("fpp write", "shared read", ...).
type scalingPoint struct {
	Servers int                `json:"servers"`
	BW      map[string]float64 `json:"bw_mib_s"`
	Seconds map[string]float64 `json:"seconds"`
}

// scalingCase is one IOR run of each point.
type scalingCase struct {
	name string
	fpp  bool
}

// scalingCases are the IOR runs of each point, in table order.
var scalingCases = []scalingCase{{"fpp", true}, {"shared", false}}

// TestScalingBench is the scaling benchmark: for each storage server
// count, a cluster over network namespaces (PostgreSQL, mgmt and meta, the
// storage servers, client hosts), every server's link rate-limited with tc
// and its drives slowed by the speed model, and IOR file-per-task and
// shared-file runs from every client host, every byte read back checked.
// It runs only under bench/scaling.sh (POOLFS_SCALING=1): it measures
// speed and takes minutes.
func TestScalingBench(t *testing.T) {
	if os.Getenv("POOLFS_SCALING") == "" {
		t.Skip("a benchmark: run bench/scaling.sh")
	}
	cfg := scalingFromEnv(t)
	ctx := scalingContext()
	var points []scalingPoint
	for _, n := range cfg.Servers {
		ok := t.Run(fmt.Sprintf("servers=%d", n), func(t *testing.T) {
			points = append(points, runScalingPoint(ctx, t, cfg, n))
		})
		if !ok || ctx.Err() != nil {
			t.FailNow()
		}
	}
	if err := writeScalingReport(cfg, points, os.Stdout); err != nil {
		t.Fatal(err)
	}
}

// runScalingPoint builds a cluster of n storage servers and runs the IOR
// cases against it.
func runScalingPoint(ctx context.Context, t *testing.T, cfg scalingConfig, n int) scalingPoint {
	lab := netlab.New(t)
	pg, mg := lab.AddHost("pg"), lab.AddHost("mgmt")
	var srv, clients []*netlab.Host
	for i := range n {
		srv = append(srv, lab.AddHost(fmt.Sprintf("s%d", i+1)))
	}
	for i := range cfg.Clients {
		clients = append(clients, lab.AddHost(fmt.Sprintf("c%d", i+1)))
	}
	for _, h := range srv {
		if err := h.LimitRate(cfg.ServerMbit * 1e6); err != nil {
			t.Fatal(err)
		}
	}
	for _, h := range clients {
		if err := h.LimitRate(cfg.ClientMbit * 1e6); err != nil {
			t.Fatal(err)
		}
	}
	root := t.TempDir()
	dir := func(host string) string { return filepath.Join(root, host) }
	shm := scalingMemDir(t)

	db := startLabPostgres(t, pg, mg)
	token := createLabCluster(t, mg, dir("mgmt"), mg.Addr(9401))
	startDaemon(t, mg, "mgmt", "poolfs mgmt: serving", "-c", dir("mgmt"), "mgmt", "--db", db, "--listen", mg.Addr(9401))
	startDaemon(t, mg, "meta", "poolfs meta: serving", "-c", dir("meta"), "meta", "--join-file", token, "--db", db, "--listen", mg.Addr(9402))
	var srvPids []int
	for _, h := range srv {
		args := []string{"-c", dir(h.Name), "storage", "--join-file", token, "--server", h.Name, "--listen", h.Addr(9500),
			"--drive-size", "1G", "--no-direct-io", "--drive-model", cfg.Model, "--drive-speed-scale", strconv.FormatFloat(cfg.Scale, 'g', -1, 64)}
		for d := range cfg.DrivesPer {
			args = append(args, "--drive", filepath.Join(shm, h.Name, fmt.Sprintf("d%d", d)))
		}
		d := startDaemon(t, h, h.Name, "poolfs storage "+h.Name+": serving", args...)
		srvPids = append(srvPids, d.cmd.Process.Pid)
	}
	// The client hosts share one joined directory: it holds the cluster's
	// address and secret only, the same on every client.
	runOn(t, clients[0], "-c", dir("client"), "cluster", "join", "--token-file", token)
	runOn(t, clients[0], "-c", dir("client"), "cluster", "pool", "default", "--scheme", cfg.Scheme, "--unit", cfg.Unit)

	tasks := cfg.Clients * cfg.TasksPer
	launcher := bench.Procs{Exe: binary, Stderr: os.Stderr, Prefix: func(rank int) []string {
		return []string{"nsenter", "--net=" + filepath.Join("/run/netns", clients[rank%len(clients)].NS), "--"}
	}}
	// The trace of the servers' links breaks each phase's time down
	// (scaling_trace_test.go) and is kept in the output directory.
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		t.Fatal(err)
	}
	names := make([]string, len(srv))
	for i, h := range srv {
		names[i] = h.Name
	}
	tr, err := newScalingTrace(filepath.Join(cfg.Out, fmt.Sprintf("trace-%d.txt", n)), names, srvPids, append(slices.Clone(srv), clients...))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := tr.Close(); err != nil {
			t.Error(err)
		}
	}()
	p := scalingPoint{Servers: n, BW: map[string]float64{}, Seconds: map[string]float64{}}
	for _, c := range scalingCases {
		if !slices.Contains(cfg.Cases, c.name) {
			continue
		}
		task := bench.IORTask{
			Target:   bench.Target{API: bench.APIPoolfs, Dir: "/ior-" + c.name, Cluster: dir("client")},
			Transfer: 1 << 20, Block: int64(n) * cfg.PerServer, Segments: 1, FilePerTask: c.fpp,
			Layout: bench.LayoutSegmented, Write: true, Read: true, Verify: true, Reorder: true,
			Iterations: 1, Seed: 0x5ca1e, Name: "ior.dat",
		}
		launch := tracingLauncher{Launcher: launcher, tr: tr, name: c.name, logf: func(f string, a ...any) {
			t.Logf("%d servers: "+f, append([]any{n}, a...)...)
		}}
		res, err := bench.RunIOR(ctx, bench.IOROptions{Task: task, Tasks: []int{tasks}, Launcher: launch})
		if err != nil {
			t.Fatalf("%d servers, %s: %v", n, c.name, err)
		}
		for _, ph := range res.Runs[0].Phases {
			key := c.name + " " + ph.Phase
			p.BW[key] = ph.BW.Mean
			if len(ph.Iterations) > 0 {
				p.Seconds[key] = ph.Iterations[0].Seconds
			}
			t.Logf("%d servers: %s %.1f MiB/s", n, key, ph.BW.Mean)
		}
	}
	// Drives flagged slow or marked down during the run are printed: the
	// figures are then of a degraded pool. Every event of the point is kept
	// beside its trace.
	events := runOn(t, clients[0], "-c", dir("client"), "events")
	if err := os.WriteFile(filepath.Join(cfg.Out, fmt.Sprintf("events-%d.txt", n)), []byte(events), 0o644); err != nil {
		t.Error(err)
	}
	var flagged []string
	for _, line := range strings.Split(events, "\n") {
		if strings.Contains(line, "drive.slow") || strings.Contains(line, "drive.down") {
			flagged = append(flagged, line)
		}
	}
	if len(flagged) > 0 {
		t.Logf("%d servers: drives flagged during the run:\n%s", n, strings.Join(flagged, "\n"))
	}
	return p
}

// scalingContext is cancelled by SIGINT or SIGTERM, for the benchmark tests
// of this binary together: once a run is interrupted, no later benchmark
// test starts.
var scalingContext = sync.OnceValue(func() context.Context {
	ctx, _ := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	return ctx
})

// stamp is when a report was made, for its header.
func stamp() string { return time.Now().UTC().Format("2006-01-02 15:04 UTC") }

// scalingMemDir makes a directory in memory (tmpfs) for the drives of a
// scaling run, removed at the end, and makes it TMPDIR, where pgtest puts
// PostgreSQL's data directory. The drives are then slow only by the speed
// model, never by this machine's disk, and PostgreSQL's data stands for
// the fast disk of a metadata host.
func scalingMemDir(t *testing.T) string {
	t.Helper()
	shm, err := os.MkdirTemp("/dev/shm", fmt.Sprintf("poolfs-scaling-%d-", os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(shm) })
	if err := os.Chmod(shm, 0o755); err != nil { // PostgreSQL's user enters it
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", shm)
	return shm
}
