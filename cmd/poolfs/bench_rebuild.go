package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"poolfs/internal/bench"
	"poolfs/internal/client"
	"poolfs/internal/cluster"
	"poolfs/internal/placement"
	"poolfs/internal/storage"
)

// rebuildRun is the result of one layout in `poolfs bench rebuild`.
type rebuildRun struct {
	Layout          string           `json:"layout"`
	Drives          int              `json:"drives"`
	Scheme          string           `json:"scheme"`
	FillBytes       int64            `json:"fill_bytes"`
	FailAtSec       float64          `json:"fail_at_sec"`
	RebuildSec      float64          `json:"rebuild_sec"`
	Throughput      []float64        `json:"throughput_mib_s"` // client MiB/s, one per second
	DriveIO         map[string]int64 `json:"drive_rebuild_io"` // bytes read+written per drive
	BusiestOverMean float64          `json:"busiest_over_mean"`
	Verified        bool             `json:"verified"`
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
	var drives int
	var scheme, model, fill, unit, out string
	var scale float64
	cmd := &cobra.Command{
		Use:   "rebuild",
		Short: "The DDP vs RAID-6 experiment: fail a drive under load, declustered and grouped, same emulated drives",
		Long: `For each layout, start a private cluster of emulated drives (speed model scaled so that
the drives, not this machine, are the bottleneck), fill it, run a sequential write+read load,
fail a drive, and record client throughput every second, the rebuild duration and each drive's
rebuild I/O. Writes OUT.json and OUT.svg and prints the rebuild-time ratio next to the
theoretical (N-1)/(k+1) bound. Every byte is verified at the end.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			k, m, err := cluster.ParseScheme(scheme)
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
			var runs []rebuildRun
			for _, layout := range []string{"declustered", "grouped"} {
				r, err := runRebuildBench(cmd.Context(), layout, drives, scheme, model, scale, fb, uint32(u))
				if err != nil {
					return fmt.Errorf("%s: %w", layout, err)
				}
				fmt.Printf("%-12s rebuild %6.1f s, busiest/mean drive rebuild I/O %.2f, verified %v\n",
					layout, r.RebuildSec, r.BusiestOverMean, r.Verified)
				runs = append(runs, r)
			}
			ratio := runs[1].RebuildSec / runs[0].RebuildSec
			bound := float64(drives-1) / float64(k+1)
			fmt.Printf("grouped/declustered rebuild time: %.1fx (theoretical bound (N-1)/(k+1) = %.1f for N=%d, %d+%d)\n",
				ratio, bound, drives, k, m)
			b, _ := json.MarshalIndent(map[string]any{"runs": runs, "ratio": ratio, "bound": bound}, "", "  ")
			if err := os.WriteFile(out+".json", b, 0o644); err != nil {
				return err
			}
			var series []bench.Series
			for _, r := range runs {
				s := bench.Series{Name: r.Layout}
				for i, v := range r.Throughput {
					s.X, s.Y = append(s.X, float64(i)-r.FailAtSec), append(s.Y, v)
				}
				series = append(series, s)
			}
			ch := bench.TimelineChart(series, 0, runs[0].RebuildSec)
			ch.Title = fmt.Sprintf("Client throughput, drive failed at 0 s (%d drives %s, %s x%g)", drives, scheme, model, scale)
			ch.Mark.Label = "declustered rebuild"
			var svg bytes.Buffer
			if err := ch.WriteSVG(&svg); err != nil {
				return err
			}
			fmt.Printf("wrote %s.json and %s.svg\n", out, out)
			return os.WriteFile(out+".svg", svg.Bytes(), 0o644)
		},
	}
	f := cmd.Flags()
	f.IntVar(&drives, "drives", 24, "drives per pool")
	f.StringVar(&scheme, "scheme", "8+2", "erasure scheme")
	f.StringVar(&model, "drive-model", "hdd-7200", "emulated drive model")
	f.Float64Var(&scale, "drive-speed-scale", 0.05, "drive speed factor (smaller: slower drives, so the CPU is not the bottleneck)")
	f.StringVar(&fill, "fill", "96M", "user bytes written before the failure")
	f.StringVar(&unit, "unit", "64K", "stripe unit")
	f.StringVar(&out, "out", "rebuild", "result file prefix (PREFIX.json, PREFIX.svg)")
	return cmd
}

func runRebuildBench(ctx context.Context, layout string, drives int, scheme, model string, scale float64, fill int64, unit uint32) (rebuildRun, error) {
	r := rebuildRun{Layout: layout, Drives: drives, Scheme: scheme, FillBytes: fill}
	dir, err := os.MkdirTemp("", "poolfs-bench-rebuild-")
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(dir)
	c, err := cluster.Start(ctx, cluster.Config{Dir: dir, Listen: "127.0.0.1:0", Drives: drives, Scheme: scheme,
		Unit: unit, DriveSize: 4 << 30, Layout: layout, DriveModel: model, SpeedScale: scale,
		GCInterval: time.Hour, HealthInterval: 200 * time.Millisecond, RebuildInterval: 5 * time.Second})
	if err != nil {
		return r, err
	}
	defer c.Close()
	conn, err := cluster.Connect(ctx, dir, client.Options{})
	if err != nil {
		return r, err
	}
	defer conn.Close()
	files := map[string][]byte{}
	const fileSize = 4 << 20
	for i := int64(0); i*fileSize < fill; i++ {
		data := make([]byte, fileSize)
		rand.Read(data)
		p := fmt.Sprintf("/fill%04d", i)
		if _, err := conn.Client.Put(ctx, p, bytes.NewReader(data), client.PutOptions{Size: fileSize}); err != nil {
			return r, err
		}
		files[p] = data
	}
	var names []string
	for p := range files {
		names = append(names, p)
	}
	sort.Strings(names)
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
	for i := 0; i < 5; i++ {
		<-tick.C
		sample()
	}
	r.FailAtSec = time.Since(start).Seconds()
	if err := c.Mgmt.FailDrive(ctx, 3, "bench rebuild"); err != nil {
		stop()
		wg.Wait()
		return r, err
	}
	if err := c.Mgmt.DriveFault(ctx, faultFail(3)); err != nil {
		stop()
		wg.Wait()
		return r, err
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
			r.RebuildSec = time.Since(failed).Seconds()
			r.DriveIO = st.DriveIO
			break
		}
		if ctx.Err() != nil {
			stop()
			wg.Wait()
			return r, ctx.Err()
		}
	}
	for i := 0; i < 3; i++ {
		<-tick.C
		sample()
	}
	stop()
	wg.Wait()
	var sum, hi int64
	for _, v := range r.DriveIO {
		sum += v
		hi = max(hi, v)
	}
	if len(r.DriveIO) > 0 && sum > 0 {
		r.BusiestOverMean = float64(hi) / (float64(sum) / float64(len(r.DriveIO)))
	}
	if _, err := conn.Client.RefreshMap(ctx); err != nil {
		return r, err
	}
	for p, want := range files {
		var buf bytes.Buffer
		if _, err := conn.Client.Get(ctx, p, &buf, client.GetOptions{}); err != nil {
			return r, fmt.Errorf("verify %s: %w", p, err)
		}
		if !bytes.Equal(buf.Bytes(), want) {
			return r, fmt.Errorf("verify %s: content differs", p)
		}
	}
	r.Verified = true
	return r, nil
}

func faultFail(id int) storage.FaultArgs {
	return storage.FaultArgs{Drive: placement.DriveID(id), Op: "fail"}
}
