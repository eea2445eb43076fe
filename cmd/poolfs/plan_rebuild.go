package main

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"poolfs/internal/bench"
	"poolfs/internal/chunkstore"
	"poolfs/internal/cluster"
	"poolfs/internal/placement"
	"poolfs/internal/plan"
)

// fillOf parses --fill: a size, or a percentage of the pool's usable
// capacity.
func fillOf(s string, p plan.Pool) (int64, error) {
	if pct, ok := strings.CutSuffix(strings.TrimSpace(s), "%"); ok {
		v, err := strconv.ParseFloat(pct, 64)
		if err != nil || v <= 0 || v > 100 {
			return 0, fmt.Errorf("--fill %q: want a size or a percentage in (0, 100]", s)
		}
		c, err := plan.CapacityOf(p)
		if err != nil {
			return 0, err
		}
		return int64(float64(c.Usable) * v / 100), nil
	}
	return parseSize(s)
}

// rebuildFlags are the flags of the load a rebuild runs under.
type rebuildFlags struct {
	fill, priorities string
	clientLoad       float64
	clientMiBs       float64
	failures         int
	simStripes       int
}

func (r *rebuildFlags) add(c *cobra.Command) {
	fl := c.Flags()
	fl.StringVar(&r.fill, "fill", "80%", "user data stored: a size or a percentage of the usable capacity")
	fl.StringVar(&r.priorities, "priority", "medium", "rebuild priorities, comma-separated (lowest, low, medium, high, highest)")
	fl.Float64Var(&r.clientLoad, "client-load", 0, "fraction of each drive's time clients use (0: idle pool; 1: saturated, as under an IOR run)")
	fl.Float64Var(&r.clientMiBs, "client-mibs", 0, "client load as MiB/s of sequential I/O, half read, half written (instead of --client-load)")
	fl.IntVar(&r.failures, "failures", 1, "drives that fail at once")
	fl.IntVar(&r.simStripes, "sim-stripes", 0, "stripes simulated at most (0: the default; more stripes stand for several each)")
}

// inputs returns the rebuild input of pool p at priority prio.
func (r *rebuildFlags) input(p plan.Pool, prio string) (plan.RebuildInput, error) {
	fill, err := fillOf(r.fill, p)
	if err != nil {
		return plan.RebuildInput{}, err
	}
	load := r.clientLoad
	if r.clientMiBs > 0 {
		load = plan.ClientLoad(p, r.clientMiBs)
	}
	return plan.RebuildInput{Pool: p, FillBytes: fill, Failures: r.failures, Priority: prio, ClientLoad: load,
		SimStripes: r.simStripes}, nil
}

func planRebuildCmd() *cobra.Command {
	var f poolFlags
	var r rebuildFlags
	var svg string
	var fromBench []string
	cmd := &cobra.Command{
		Use:   "rebuild",
		Short: "Simulate a drive's rebuild: time, time critical, busiest drive, client throughput",
		Long: `Fails drives of each pool, places and plans the rebuild with the code the management service
runs (placement, recovery.Make) and executes the plan in simulated time with the rebuild
scheduler's rules and the drive model. Times are from the start of the rebuild run (after the
failure is detected and the stripes scanned). With --from-bench, predicts the pools of
` + "`poolfs bench rebuild`" + ` result files and prints measured against predicted.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(fromBench) > 0 {
				return predictBench(fromBench, r.simStripes)
			}
			pools, err := f.pools()
			if err != nil {
				return err
			}
			fmt.Printf("%-22s %6s %-8s %10s %10s %9s %7s %10s %8s %s\n", "pool", "drives", "priority", "rebuild", "critical", "bound", "drives", "busiest/mn", "clients", "rebuilt")
			var series []bench.Series
			for _, prio := range strings.Split(r.priorities, ",") {
				prio = strings.TrimSpace(prio)
				for _, p := range pools {
					in, err := r.input(p, prio)
					if err != nil {
						return err
					}
					res, err := plan.SimulateRebuild(in)
					if err != nil {
						return fmt.Errorf("%d drives %s: %w", p.Drives, poolName(p), err)
					}
					fmt.Printf("%-22s %6d %-8s %10s %10s %9s %7d %10.2f %7.0f%% %s\n", poolName(p), p.Drives, prio,
						dur(res.Seconds), dur(res.CriticalSeconds), dur(max(res.BoundSeconds, res.BusiestSeconds)),
						res.Drives, res.BusiestOverMean, 100*res.ClientFraction, human(int64(res.RebuiltBytes)))
					series = addSeries(series, poolName(p)+" "+prio, float64(p.Drives), res.Seconds/3600)
				}
			}
			return lineChart(svg, "Simulated rebuild time of one drive", "hours", series)
		},
	}
	f.add(cmd)
	r.add(cmd)
	cmd.Flags().StringVar(&svg, "svg", "", "write a chart of rebuild time against pool size to this file")
	cmd.Flags().StringSliceVar(&fromBench, "from-bench", nil, "predict the runs of these `poolfs bench rebuild` JSON files")
	return cmd
}

// dur formats seconds for a table.
func dur(s float64) string {
	switch {
	case s <= 0:
		return "-"
	case s < 120:
		return fmt.Sprintf("%.1f s", s)
	case s < 7200:
		return fmt.Sprintf("%.1f min", s/60)
	}
	return fmt.Sprintf("%.1f h", s/3600)
}

// benchFile is what predictBench reads of a `poolfs bench rebuild` result.
type benchFile struct {
	Command string `json:"command"`
	Runs    []struct {
		Layout      string  `json:"layout"`
		Drives      int     `json:"drives"`
		Scheme      string  `json:"scheme"`
		FillBytes   int64   `json:"fill_bytes"`
		RebuildSec  float64 `json:"rebuild_sec"`
		RunSec      float64 `json:"run_sec"`
		HealthyMiBs float64 `json:"healthy_mib_s"`
		ClientSec   float64 `json:"client_drive_sec_per_sec"`
		OnRebuild   float64 `json:"client_rebuild_drive_sec_per_sec"`
		Rebuilt     int64   `json:"rebuilt_bytes"`
	} `json:"runs"`
}

// benchFlag returns the value of --name in a recorded command line, or def.
func benchFlag(command, name, def string) string {
	m := regexp.MustCompile(`--` + name + `[ =](\S+)`).FindStringSubmatch(command)
	if m == nil {
		return def
	}
	return m[1]
}

// predictBench simulates the pools of bench rebuild result files: the
// emulated drives (4 GiB, the run's model and scale), its scheme and unit,
// the fill that puts on the failed drive what the run rebuilt, the client
// load on the drives the rebuild used (benchLoad), default priority.
func predictBench(files []string, simStripes int) error {
	fmt.Printf("%-10s %6s %-12s %10s %10s %10s %8s\n", "file", "drives", "layout", "measured", "predicted", "error", "load")
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		var bf benchFile
		if err := json.Unmarshal(b, &bf); err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		sm, err := chunkstore.ModelByName(benchFlag(bf.Command, "drive-model", "hdd-7200"))
		if err != nil {
			return err
		}
		scale, err := strconv.ParseFloat(benchFlag(bf.Command, "drive-speed-scale", "0.02"), 64)
		if err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		unit, err := parseSize(benchFlag(bf.Command, "unit", "256K"))
		if err != nil {
			return err
		}
		for _, run := range bf.Runs {
			k, m, err := cluster.ParseScheme(run.Scheme)
			if err != nil {
				return err
			}
			layout, err := placement.ParseLayout(run.Layout)
			if err != nil {
				return err
			}
			p := plan.Pool{Drives: run.Drives, DriveBytes: 4 << 30, Speed: sm.Scale(scale), K: k, M: m, Layout: layout, Unit: int(unit)}
			load := benchLoad(p, run.ClientSec, run.OnRebuild, run.HealthyMiBs)
			in := plan.RebuildInput{Pool: p, FillBytes: run.FillBytes, ClientLoad: load, SimStripes: simStripes}
			res, err := plan.SimulateRebuild(in)
			if err != nil {
				return err
			}
			// The failed drive held what placement put on it, not the
			// pool's mean (one group of a grouped pool may hold a quarter
			// more or less): simulate again with the fill that gives the
			// bytes the run rebuilt.
			if run.Rebuilt > 0 && res.RebuiltBytes > 0 {
				in.FillBytes = int64(float64(in.FillBytes) * float64(run.Rebuilt) / res.RebuiltBytes)
				if res, err = plan.SimulateRebuild(in); err != nil {
					return err
				}
			}
			fmt.Printf("%-10s %6d %-12s %9.1fs %9.1fs %+9.0f%% %8.2f\n", strings.TrimSuffix(lastPart(file), ".json"), run.Drives, run.Layout,
				run.RunSec, res.Seconds, 100*(res.Seconds-run.RunSec)/run.RunSec, load)
		}
	}
	return nil
}

// benchLoad is the client load of a bench rebuild run: the drive time its
// clients' I/O took per second during the rebuild (every read, write,
// sync and delete) on each drive the rebuild used (onRebuild), where it
// was recorded; else that time over the drives clients use then (a
// declustered pool's survivors; a grouped pool's groups, the hot spare
// standing in), which misses that a grouped rebuild's one group may carry
// more or less than its share. Files written before either was recorded
// give only the healthy throughput, which counts the fragment reads and
// writes alone.
func benchLoad(p plan.Pool, clientSec, onRebuild, healthyMiBs float64) float64 {
	if onRebuild > 0 {
		return onRebuild
	}
	if clientSec <= 0 {
		return plan.ClientLoad(p, healthyMiBs)
	}
	drives := plan.ClientDrives(p)
	if p.Layout == placement.Declustered {
		drives-- // the failed one
	}
	return clientSec / float64(drives)
}

func lastPart(path string) string {
	if i := strings.LastIndexByte(path, '/'); i >= 0 {
		return path[i+1:]
	}
	return path
}
