package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"poolfs/internal/bench"
	"poolfs/internal/chunkstore"
	"poolfs/internal/client"
	"poolfs/internal/cluster"
	"poolfs/internal/erasure"
	"poolfs/internal/placement"
	"poolfs/internal/storage"
)

// rebuildRun is the result of one layout in `poolfs bench rebuild`.
type rebuildRun struct {
	Layout      string    `json:"layout"`
	Drives      int       `json:"drives"`
	Scheme      string    `json:"scheme"`
	FillBytes   int64     `json:"fill_bytes"`
	FailAtSec   float64   `json:"fail_at_sec"`
	RebuildSec  float64   `json:"rebuild_sec"` // failure to healthy, under load
	RunSec      float64   `json:"run_sec"`     // the coordinator's run alone
	Throughput  []float64 `json:"throughput_mib_s"`
	HealthyMiBs float64   `json:"healthy_mib_s"` // mean client MiB/s before the failure
	RebuildMiBs float64   `json:"rebuild_mib_s"` // mean client MiB/s while rebuilding
	// RebuiltBytes is what the rebuild wrote; BoundSec the time the drive
	// model allows for its reads and writes spread over the surviving
	// drives, BusiestBoundSec the busiest drive's busy time alone.
	RebuiltBytes    int64            `json:"rebuilt_bytes"`
	BoundSec        float64          `json:"bound_sec"`
	BusiestBoundSec float64          `json:"busiest_bound_sec"`
	DriveIO         map[string]int64 `json:"drive_rebuild_io"` // bytes read+written per drive
	BusiestOverMean float64          `json:"busiest_over_mean"`
	ReadSkew        float64          `json:"read_busiest_over_mean"`
	WriteSkew       float64          `json:"write_busiest_over_mean"`
	CPUCores        float64          `json:"cpu_cores"` // mean cores busy from failure to healthy
	ScanSec         float64          `json:"scan_sec"`  // one scan of the stripes (a run has two)
	// LoadAvg is the machine's 1-minute load average (/proc/loadavg) before
	// the failure and after the rebuild: other processes compete for the CPUs.
	LoadAvg [2]float64 `json:"loadavg"`
	// ClientDriveSec is the drive time (by the speed model) that client
	// I/O took per second from the failure to healthy, summed over the
	// drives: every read, write, sync and delete that was not the
	// rebuild's (the collector's deletes and syncs included). ClientOps
	// counts those operations per second.
	ClientDriveSec float64            `json:"client_drive_sec_per_sec"`
	ClientOps      map[string]float64 `json:"client_ops_per_sec"`
	// ClientRebuildDriveSec is the client drive time per second on each
	// drive the rebuild read or wrote, their mean: the load the rebuild
	// competed with (a grouped pool's rebuild uses one group and its
	// spare).
	ClientRebuildDriveSec float64 `json:"client_rebuild_drive_sec_per_sec"`
	// Further failures with no client load, one per priority (grouped:
	// the first priority only).
	NoLoad   []noLoadRun `json:"noload,omitempty"`
	Verified bool        `json:"verified"`
}

// noLoadRun is one rebuild without client load.
type noLoadRun struct {
	Priority  string  `json:"priority"`
	Drive     string  `json:"drive"`
	RunSec    float64 `json:"run_sec"`
	BoundSec  float64 `json:"bound_sec"`                // aggregate: all busy time over the surviving drives
	Busiest   float64 `json:"busiest_sec"`              // the busiest drive's busy time
	Percent   float64 `json:"percent_of_bound"`         // of BoundSec
	PercentB  float64 `json:"percent_of_busiest_bound"` // of the busiest drive's time
	ReadSkew  float64 `json:"read_busiest_over_mean"`
	WriteSkew float64 `json:"write_busiest_over_mean"`
	IOSkew    float64 `json:"busiest_over_mean"`
	CPUCores  float64 `json:"cpu_cores"`
}

// rebuildOpts are the flags of `poolfs bench rebuild`.
type rebuildOpts struct {
	drives  int
	scheme  string
	model   string
	scale   float64
	fill    int64
	unit    uint32
	healthy int // seconds of load before the failure
	// noLoad are the rebuild priorities of the further failures measured
	// without client load, one failure each (grouped: the first only).
	noLoad []string
}

// addBenchRebuild adds `bench rebuild` to the bench command of root.
func addBenchRebuild(root *cobra.Command, g *globals) {
	for _, c := range root.Commands() {
		if c.Name() == "bench" {
			c.AddCommand(benchRebuildCmd(g))
		}
	}
}

func benchRebuildCmd(g *globals) *cobra.Command {
	var o rebuildOpts
	var fill, unit, out, layouts string
	cmd := &cobra.Command{
		Use:   "rebuild",
		Short: "The DDP vs RAID-6 experiment: fail a drive under load, declustered and grouped, same emulated drives",
		Long: `For each layout, start a private cluster, fill it (at full speed), restart it on emulated
drives (speed model scaled so that the drives, not this machine, are the bottleneck), run a
sequential write+read load, fail a drive, and record client throughput every second, the
rebuild duration, each drive's rebuild reads and writes, and the CPU used. The declustered run
then fails further drives without load, one per --no-load priority, and compares each rebuild
time with what the drive model allows. Writes OUT.json, OUT.svg (both layouts) and OUT-LAYOUT.svg (each with its rebuild
window) and prints the rebuild-time ratio next to the theoretical (N-1)/(k+1) bound. Every byte
is verified at the end.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			k, m, err := cluster.ParseScheme(o.scheme)
			if err != nil {
				return err
			}
			fb, err := parseSize(fill)
			if err != nil {
				return err
			}
			u, err := parseSize(unit)
			if err != nil {
				return err
			}
			o.fill, o.unit = fb, uint32(u)
			var runs []rebuildRun
			for _, layout := range strings.Split(layouts, ",") {
				r, err := runRebuildBench(cmd.Context(), o, layout)
				if err != nil {
					return fmt.Errorf("%s: %w", layout, err)
				}
				printRebuildRun(r)
				runs = append(runs, r)
			}
			res := map[string]any{"runs": runs, "command": strings.Join(os.Args, " ")}
			if len(runs) == 2 {
				ratio := runs[1].RebuildSec / runs[0].RebuildSec
				rate := (float64(runs[0].RebuiltBytes) / runs[0].RebuildSec) / (float64(runs[1].RebuiltBytes) / runs[1].RebuildSec)
				bound := float64(o.drives-1) / float64(k+1)
				fmt.Printf("grouped/declustered rebuild time: %.1fx, rebuild rate %.1fx (theoretical bound (N-1)/(k+1) = %.1f for N=%d, %d+%d)\n",
					ratio, rate, bound, o.drives, k, m)
				res["ratio"], res["rate_ratio"], res["bound"] = ratio, rate, bound
				if d, g := runs[0].NoLoad, runs[1].NoLoad; len(d) > 0 && len(g) > 0 && d[0].Priority == g[0].Priority {
					nl := g[0].RunSec / d[0].RunSec
					fmt.Printf("no load, priority %s: grouped/declustered rebuild time %.1fx (drive bounds: %.1f s busiest grouped drive, %.1f s declustered)\n",
						d[0].Priority, nl, g[0].Busiest, max(d[0].BoundSec, d[0].Busiest))
					res["noload_ratio"] = nl
				}
			}
			b, _ := json.MarshalIndent(res, "", "  ")
			if err := os.WriteFile(out+".json", b, 0o644); err != nil {
				return err
			}
			if err := writeRebuildCharts(out, runs, o); err != nil {
				return err
			}
			fmt.Printf("wrote %s.json and %s*.svg\n", out, out)
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.drives, "drives", 60, "drives per pool")
	f.StringVar(&o.scheme, "scheme", "8+2", "erasure scheme")
	f.StringVar(&o.model, "drive-model", "hdd-7200", "emulated drive model")
	f.Float64Var(&o.scale, "drive-speed-scale", 0.02, "drive speed factor (smaller: slower drives, so the CPU is not the bottleneck)")
	f.StringVar(&fill, "fill", "3G", "user bytes written before the failure")
	f.StringVar(&unit, "unit", "256K", "stripe unit")
	f.IntVar(&o.healthy, "healthy", 8, "seconds of load before the failure")
	f.StringSliceVar(&o.noLoad, "no-load", []string{"medium", "highest"}, "then rebuild one more failure without client load at each of these priorities (grouped: the first only; none: skip; the loaded rebuild runs at the default, medium)")
	f.StringVar(&layouts, "layouts", "declustered,grouped", "layouts to run, in order")
	f.StringVar(&out, "out", "rebuild", "result file prefix (PREFIX.json, PREFIX.svg)")
	return cmd
}

func printRebuildRun(r rebuildRun) {
	fmt.Printf("%-12s rebuild %6.1f s (run %.1f s; drive bound %.1f s, busiest drive %.1f s: %.0f%% of the bound), %s rebuilt\n",
		r.Layout, r.RebuildSec, r.RunSec, r.BoundSec, r.BusiestBoundSec,
		100*max(r.BoundSec, r.BusiestBoundSec)/max(r.RunSec, 1e-9), human(r.RebuiltBytes))
	fmt.Printf("             busiest/mean drive rebuild I/O: reads %.2f, writes %.2f, all %.2f; CPU %.2f cores; a scan of the stripes %.1f s\n",
		r.ReadSkew, r.WriteSkew, r.BusiestOverMean, r.CPUCores, r.ScanSec)
	fmt.Printf("             client %.1f MiB/s healthy, %.1f MiB/s during the rebuild (%.0f%%); verified %v\n",
		r.HealthyMiBs, r.RebuildMiBs, 100*r.RebuildMiBs/max(r.HealthyMiBs, 1e-9), r.Verified)
	fmt.Printf("             client drive time during the rebuild %.1f s/s (per second: %.1f reads, %.1f writes, %.1f syncs, %.1f deletes)\n",
		r.ClientDriveSec, r.ClientOps["read"], r.ClientOps["write"], r.ClientOps["sync"], r.ClientOps["delete"])
	for _, n := range r.NoLoad {
		fmt.Printf("             no load, priority %s (%s): rebuild run %.1f s, drive bound %.1f s (%.0f%%), busiest drive %.1f s (%.0f%%); busiest/mean reads %.2f writes %.2f all %.2f; CPU %.2f cores\n",
			n.Priority, n.Drive, n.RunSec, n.BoundSec, n.Percent, n.Busiest, n.PercentB, n.ReadSkew, n.WriteSkew, n.IOSkew, n.CPUCores)
	}
	fmt.Printf("             load average %.2f before the failure, %.2f after the rebuild (%d CPUs)\n", r.LoadAvg[0], r.LoadAvg[1], runtime.NumCPU())
}

// writeRebuildCharts writes OUT.svg (every layout, the first one's rebuild
// window shaded) and OUT-LAYOUT.svg (one layout, its own window).
func writeRebuildCharts(out string, runs []rebuildRun, o rebuildOpts) error {
	var series []bench.Series
	for _, r := range runs {
		s := bench.Series{Name: r.Layout}
		for i, v := range r.Throughput {
			s.X, s.Y = append(s.X, float64(i+1)-r.FailAtSec), append(s.Y, v)
		}
		series = append(series, s)
	}
	write := func(name string, ss []bench.Series, r rebuildRun) error {
		ch := bench.TimelineChart(ss, 0, r.RebuildSec)
		ch.Title = fmt.Sprintf("Client throughput, drive failed at 0 s (%d drives %s, %s x%g)", o.drives, o.scheme, o.model, o.scale)
		ch.Mark.Label = r.Layout + " rebuild"
		var svg bytes.Buffer
		if err := ch.WriteSVG(&svg); err != nil {
			return err
		}
		return os.WriteFile(name, svg.Bytes(), 0o644)
	}
	if len(runs) == 0 {
		return nil
	}
	if err := write(out+".svg", series, runs[0]); err != nil {
		return err
	}
	for i, r := range runs {
		if err := write(out+"-"+r.Layout+".svg", series[i:i+1], r); err != nil {
			return err
		}
	}
	return nil
}

// benchCluster starts the cluster of one bench run in dir with drive
// model (scaled) and connects to it; wrap, if not nil, wraps every drive
// (cluster.Config.WrapDrive).
func benchCluster(ctx context.Context, dir, layout string, drives int, scheme, model string, scale float64, unit uint32, wrap func(placement.DriveID, chunkstore.Drive) chunkstore.Drive) (*cluster.Cluster, *cluster.Conn, error) {
	c, err := cluster.Start(ctx, cluster.Config{Dir: dir, Listen: "127.0.0.1:0", Drives: drives, Scheme: scheme,
		Unit: unit, DriveSize: 4 << 30, Overcommit: true, Layout: layout, DriveModel: model, SpeedScale: scale,
		GCInterval: time.Hour, HealthInterval: 200 * time.Millisecond, RebuildInterval: 5 * time.Second, WrapDrive: wrap})
	if err != nil {
		return nil, nil, err
	}
	conn, err := cluster.Connect(ctx, dir, client.Options{})
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	return c, conn, nil
}

// cpuSeconds is the user+system CPU time of this process.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// rebuildBound is the shortest time the drives of model sm allow for the
// rebuild I/O of reads and writes (bytes per drive, in fragments of
// fragSize): the larger of the busiest drive's busy time and the total busy
// time spread over the surviving drives.
func rebuildBound(sm chunkstore.SpeedModel, reads, writes map[string]int64, surviving int, fragSize int64) (aggregate, busiest float64) {
	var sum float64
	for _, v := range rebuildBusy(sm, reads, writes, fragSize) {
		sum += v
		busiest = max(busiest, v)
	}
	return sum / float64(surviving), busiest
}

// rebuildBusy is each drive's busy time, in seconds, for the rebuild I/O
// of reads and writes (bytes per drive, in fragments of fragSize) by the
// speed model sm.
func rebuildBusy(sm chunkstore.SpeedModel, reads, writes map[string]int64, fragSize int64) map[string]float64 {
	svc := func(bw int64) float64 {
		d := sm.Latency.Seconds()
		if bw > 0 {
			d += float64(fragSize) / float64(bw)
		}
		if sm.IOPS > 0 {
			d = max(d, 1/float64(sm.IOPS))
		}
		return d
	}
	busy := map[string]float64{}
	for d, b := range reads {
		busy[d] += float64(b/fragSize) * svc(sm.ReadBW)
	}
	for d, b := range writes {
		busy[d] += float64(b/fragSize) * svc(sm.WriteBW)
	}
	return busy
}

// skew is the busiest drive's bytes over the mean of the drives that did any.
func skew(io map[string]int64) float64 {
	var sum, hi int64
	for _, v := range io {
		sum += v
		hi = max(hi, v)
	}
	if len(io) == 0 || sum == 0 {
		return 0
	}
	return float64(hi) / (float64(sum) / float64(len(io)))
}

func diff(after, before map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// failAndWait fails drive id and samples every tick until the rebuild it
// starts has finished. It returns the seconds from the failure to the end.
func failAndWait(ctx context.Context, c *cluster.Cluster, id int, tick *time.Ticker, sample func()) (float64, error) {
	if err := c.Mgmt.FailDrive(ctx, placement.DriveID(id), "bench rebuild"); err != nil {
		return 0, err
	}
	if err := c.Mgmt.DriveFault(ctx, faultFail(id)); err != nil {
		return 0, err
	}
	failed := time.Now()
	started := false
	for {
		<-tick.C
		sample()
		st := c.Mgmt.Rebuild()
		if st.Active {
			started = true
		}
		if started && !st.Active && st.Degraded+st.Critical == 0 {
			return time.Since(failed).Seconds(), nil
		}
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
	}
}

func runRebuildBench(ctx context.Context, o rebuildOpts, layout string) (rebuildRun, error) {
	r := rebuildRun{Layout: layout, Drives: o.drives, Scheme: o.scheme, FillBytes: o.fill}
	k, _, _ := cluster.ParseScheme(o.scheme)
	sm, err := chunkstore.ModelByName(o.model)
	if err != nil {
		return r, err
	}
	sm = sm.Scale(o.scale)
	dir, err := os.MkdirTemp("", "poolfs-bench-rebuild-")
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(dir)
	// Fill at full speed (no drive model), then restart on the emulated drives.
	c, conn, err := benchCluster(ctx, dir, layout, o.drives, o.scheme, "none", 0, o.unit, nil)
	if err != nil {
		return r, err
	}
	// The fill's bytes are not kept: each file's are drawn again from its
	// seed to be verified (8 GiB of fill held in memory, with the garbage
	// collector's headroom, took 17 GB).
	const fileSize = 4 << 20
	var names []string
	data := make([]byte, fileSize)
	for i := int64(0); i*fileSize < o.fill; i++ {
		fillContent(i, data)
		p := fmt.Sprintf("/fill%04d", i)
		if _, err := conn.Client.Put(ctx, p, bytes.NewReader(data), client.PutOptions{Size: fileSize}); err != nil {
			conn.Close()
			c.Close()
			return r, err
		}
		names = append(names, p)
	}
	conn.Close()
	c.Close()
	io := &driveTime{m: sm}
	c, conn, err = benchCluster(ctx, dir, layout, o.drives, o.scheme, o.model, o.scale, o.unit, io.wrap)
	if err != nil {
		return r, err
	}
	defer func() { conn.Close(); c.Close() }()
	files := map[string][]byte{} // what the load wrote last to each of its files
	// Load: one sequential writer and one sequential reader.
	var moved atomic.Int64
	lctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var lmu sync.Mutex
	wg.Add(2)
	go func() { // writer
		defer wg.Done()
		data := make([]byte, fileSize)
		for i := 0; lctx.Err() == nil; i++ {
			rand.Read(data)
			p := fmt.Sprintf("/load%d", i%4)
			if _, err := conn.Client.Put(lctx, p, bytes.NewReader(data), client.PutOptions{Size: fileSize}); err != nil {
				_, _ = conn.Client.RefreshMap(lctx) // a drive failed: new epoch
				continue
			}
			lmu.Lock()
			files[p] = append([]byte(nil), data...)
			lmu.Unlock()
			moved.Add(fileSize)
		}
	}()
	go func() { // reader
		defer wg.Done()
		for i := 0; lctx.Err() == nil; i++ {
			var buf bytes.Buffer
			if _, err := conn.Client.Get(lctx, names[i%len(names)], &buf, client.GetOptions{}); err == nil {
				moved.Add(int64(buf.Len()))
			}
		}
	}()
	start := time.Now()
	sample := func() {
		r.Throughput = append(r.Throughput, float64(moved.Swap(0))/(1<<20))
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for i := 0; i < o.healthy; i++ {
		<-tick.C
		sample()
	}
	for _, v := range r.Throughput[1:] { // the first second warms up
		r.HealthyMiBs += v / float64(len(r.Throughput)-1)
	}
	r.FailAtSec = time.Since(start).Seconds()
	r.LoadAvg[0] = loadAvg()
	before := c.Mgmt.Rebuild()
	io0 := io.snapshot()
	cpu0, wall0 := cpuSeconds(), time.Now()
	r.RebuildSec, err = failAndWait(ctx, c, 3, tick, sample)
	if err != nil {
		stop()
		wg.Wait()
		return r, err
	}
	ops := io.snapshot().sub(io0)
	r.CPUCores = (cpuSeconds() - cpu0) / time.Since(wall0).Seconds()
	r.LoadAvg[1] = loadAvg()
	during := r.Throughput[int(r.FailAtSec+0.5):]
	for _, v := range during {
		r.RebuildMiBs += v / float64(len(during))
	}
	after := c.Mgmt.Rebuild()
	r.RunSec, r.ScanSec = after.LastSeconds, after.ScanSec
	r.DriveIO = diff(after.DriveIO, before.DriveIO)
	reads, writes := diff(after.DriveReads, before.DriveReads), diff(after.DriveWrites, before.DriveWrites)
	r.BusiestOverMean, r.ReadSkew, r.WriteSkew = skew(r.DriveIO), skew(reads), skew(writes)
	for _, v := range writes {
		r.RebuiltBytes += v
	}
	fragSize := int64(erasure.FragmentSize(erasure.ShardSize(k*int(o.unit), k, int(o.unit))))
	r.BoundSec, r.BusiestBoundSec = rebuildBound(sm, reads, writes, o.drives-1, fragSize)
	r.clientIO(ops, sm, reads, writes, fragSize, o.drives-1)
	for i := 0; i < 3; i++ {
		<-tick.C
		sample()
	}
	stop()
	wg.Wait()
	for i, prio := range o.noLoad {
		if prio == "none" || prio == "" || (layout != "declustered" && i > 0) {
			continue // grouped: the first priority only (a grouped rebuild is slow)
		}
		n, err := noLoadRebuild(ctx, c, prio, 7+4*i, sm, o.drives-2-i, fragSize, tick)
		if err != nil {
			return r, fmt.Errorf("no-load rebuild at %s: %w", prio, err)
		}
		r.NoLoad = append(r.NoLoad, n)
	}
	// Verify every byte on unthrottled drives.
	conn.Close()
	c.Close()
	c, conn, err = benchCluster(ctx, dir, layout, o.drives, o.scheme, "none", 0, o.unit, nil)
	if err != nil {
		return r, err
	}
	var buf bytes.Buffer
	verify := func(p string, want []byte) error {
		buf.Reset()
		if _, err := conn.Client.Get(ctx, p, &buf, client.GetOptions{}); err != nil {
			return fmt.Errorf("verify %s: %w", p, err)
		}
		if !bytes.Equal(buf.Bytes(), want) {
			return fmt.Errorf("verify %s: content differs", p)
		}
		return nil
	}
	for i, p := range names {
		fillContent(int64(i), data)
		if err := verify(p, data); err != nil {
			return r, err
		}
	}
	for p, want := range files {
		if err := verify(p, want); err != nil {
			return r, err
		}
	}
	r.Verified = true
	return r, nil
}

// fillContent puts fill file i's bytes in buf: a stream seeded by i, the
// same every time.
func fillContent(i int64, buf []byte) {
	var seed [32]byte
	for j := range 8 {
		seed[j] = byte(i >> (8 * j))
	}
	if _, err := mrand.NewChaCha8(seed).Read(buf); err != nil {
		panic(err) // ChaCha8.Read does not fail
	}
}

// noLoadRebuild sets the rebuild priority, fails drive id with no client
// load, waits for the rebuild and compares its run with the drive model's
// bound over the surviving drives.
func noLoadRebuild(ctx context.Context, c *cluster.Cluster, prio string, id int, sm chunkstore.SpeedModel, surviving int, fragSize int64, tick *time.Ticker) (noLoadRun, error) {
	n := noLoadRun{Priority: prio, Drive: placement.DriveID(id).String()}
	if err := c.Mgmt.SetRebuildPriority(ctx, "default", prio); err != nil {
		return n, err
	}
	before := c.Mgmt.Rebuild()
	cpu0, wall0 := cpuSeconds(), time.Now()
	if _, err := failAndWait(ctx, c, id, tick, func() {}); err != nil {
		return n, err
	}
	n.CPUCores = (cpuSeconds() - cpu0) / time.Since(wall0).Seconds()
	after := c.Mgmt.Rebuild()
	n.RunSec = after.LastSeconds
	reads, writes := diff(after.DriveReads, before.DriveReads), diff(after.DriveWrites, before.DriveWrites)
	n.ReadSkew, n.WriteSkew, n.IOSkew = skew(reads), skew(writes), skew(diff(after.DriveIO, before.DriveIO))
	n.BoundSec, n.Busiest = rebuildBound(sm, reads, writes, surviving, fragSize)
	n.Percent = 100 * n.BoundSec / max(n.RunSec, 1e-9)
	n.PercentB = 100 * n.Busiest / max(n.RunSec, 1e-9)
	return n, nil
}

// loadAvg is the 1-minute load average of the machine, 0 if unknown.
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	var v float64
	fmt.Sscan(string(b), &v)
	return v
}

func faultFail(id int) storage.FaultArgs {
	return storage.FaultArgs{Drive: placement.DriveID(id), Op: "fail"}
}
