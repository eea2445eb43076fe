package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"poolfs/internal/bench"
	"poolfs/internal/chunkstore"
	"poolfs/internal/cluster"
	"poolfs/internal/placement"
	"poolfs/internal/plan"
)

// planCmd is `poolfs plan`: capacity, rebuild and reliability of a pool
// before it is bought (internal/plan).
func planCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "plan",
		Short: "Plan a pool: capacity, simulated rebuild time and data-loss probability",
		Long: `Answers the questions asked before buying drives: how much of the raw capacity is usable
(plan capacity), how long a drive's rebuild takes under load (plan rebuild: a discrete-event
simulation running poolfs's own placement and rebuild planner on the drive model), and how
likely data loss is (plan reliability: Markov closed form and Monte Carlo). Lists in --drives,
--scheme and --layout sweep every combination; --svg writes a chart. See docs/planning.md.`,
	}
	cmd.AddCommand(planCapacityCmd(), planRebuildCmd(), planReliabilityCmd())
	return cmd
}

// poolFlags are the flags that describe the pools to plan.
type poolFlags struct {
	drives, schemes, layouts string
	driveSize, unit, model   string
	speedScale               float64
	readBW, writeBW          string
	iops                     int
	latency                  time.Duration
	preservation             int
	servers, enclosures      int
}

func (f *poolFlags) add(c *cobra.Command) {
	fl := c.Flags()
	fl.StringVar(&f.drives, "drives", "60", "drive counts, comma-separated (a sweep: 60,120,240,480,1000,2000,5000)")
	fl.StringVar(&f.schemes, "scheme", "8+2", "erasure schemes k+m, comma-separated (a mirror of n copies is 1+(n-1))")
	fl.StringVar(&f.layouts, "layout", "declustered,grouped", "layouts: declustered, grouped (RAID-6-style groups with hot spares)")
	fl.StringVar(&f.driveSize, "drive-size", "16T", "capacity of each drive (binary units: a 300 GB drive is 279G)")
	fl.StringVar(&f.unit, "unit", "1M", "stripe unit (one fragment)")
	fl.StringVar(&f.model, "drive-model", "hdd-7200", "drive speed model: hdd-7200, hdd-10k, hdd-15k, ssd, or custom (--read-bw, --write-bw, --iops, --latency)")
	fl.Float64Var(&f.speedScale, "drive-speed-scale", 1, "speed factor of the model (0.02: the slowed drives of `poolfs bench rebuild`)")
	fl.StringVar(&f.readBW, "read-bw", "", "custom model: sequential read bandwidth per second (e.g. 200M)")
	fl.StringVar(&f.writeBW, "write-bw", "", "custom model: sequential write bandwidth per second")
	fl.IntVar(&f.iops, "iops", 0, "custom model: random I/Os per second (0: no limit)")
	fl.DurationVar(&f.latency, "latency", 0, "custom model: access time per I/O (seek + rotation)")
	fl.IntVar(&f.preservation, "preservation", 0, "drives' worth of capacity kept for rebuild, the hot spares if grouped (0: the default for the pool size; -1: none)")
	fl.IntVar(&f.servers, "servers", 0, "servers the drives are spread over (a failure domain; 0: none)")
	fl.IntVar(&f.enclosures, "enclosures", 0, "enclosures the servers are spread over (the domain above servers; 0: none)")
}

// speed returns the drive model of the flags.
func (f *poolFlags) speed() (chunkstore.SpeedModel, error) {
	var sm chunkstore.SpeedModel
	if f.model == "custom" {
		sm.Name = "custom"
		for _, v := range []struct {
			s   string
			dst *int64
		}{{f.readBW, &sm.ReadBW}, {f.writeBW, &sm.WriteBW}} {
			if v.s == "" {
				return sm, fmt.Errorf("custom drive model: --read-bw and --write-bw are required")
			}
			n, err := parseSize(v.s)
			if err != nil {
				return sm, err
			}
			*v.dst = n
		}
		sm.IOPS, sm.Latency = f.iops, f.latency
	} else {
		var err error
		if sm, err = chunkstore.ModelByName(f.model); err != nil {
			return sm, err
		}
	}
	if f.speedScale <= 0 {
		return sm, fmt.Errorf("--drive-speed-scale %g: want > 0", f.speedScale)
	}
	return sm.Scale(f.speedScale), nil
}

// pools expands the flags into every combination of drive count, scheme
// and layout.
func (f *poolFlags) pools() ([]plan.Pool, error) {
	size, err := parseSize(f.driveSize)
	if err != nil {
		return nil, err
	}
	unit, err := parseSize(f.unit)
	if err != nil {
		return nil, err
	}
	sm, err := f.speed()
	if err != nil {
		return nil, err
	}
	var out []plan.Pool
	for _, ls := range strings.Split(f.layouts, ",") {
		layout, err := placement.ParseLayout(strings.TrimSpace(ls))
		if err != nil {
			return nil, err
		}
		for _, ss := range strings.Split(f.schemes, ",") {
			k, m, err := cluster.ParseScheme(strings.TrimSpace(ss))
			if err != nil {
				return nil, err
			}
			for _, ds := range strings.Split(f.drives, ",") {
				n, err := strconv.Atoi(strings.TrimSpace(ds))
				if err != nil {
					return nil, fmt.Errorf("--drives %q: %w", ds, err)
				}
				p := plan.Pool{Drives: n, DriveBytes: size, Speed: sm, K: k, M: m, Layout: layout,
					Preservation: f.preservation, Unit: int(unit), Servers: f.servers, Enclosures: f.enclosures}
				if err := p.Validate(); err != nil {
					return nil, err
				}
				out = append(out, p)
			}
		}
	}
	return out, nil
}

// poolName names a pool in tables and legends.
func poolName(p plan.Pool) string {
	return fmt.Sprintf("%d+%d %s", p.K, p.M, p.Layout)
}

// lineChart writes series against the drive count.
func lineChart(path, title, ylabel string, series []bench.Series) error {
	if path == "" {
		return nil
	}
	ch := &bench.LineChart{Title: title, XLabel: "drives in the pool", YLabel: ylabel, Series: series}
	var b bytes.Buffer
	if err := ch.WriteSVG(&b); err != nil {
		return err
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return err
	}
	fmt.Printf("wrote %s\n", path)
	return nil
}

// addSeries appends (x, y) to the series named name.
func addSeries(ss []bench.Series, name string, x, y float64) []bench.Series {
	for i := range ss {
		if ss[i].Name == name {
			ss[i].X, ss[i].Y = append(ss[i].X, x), append(ss[i].Y, y)
			return ss
		}
	}
	return append(ss, bench.Series{Name: name, X: []float64{x}, Y: []float64{y}})
}

func planCapacityCmd() *cobra.Command {
	var f poolFlags
	var svg string
	cmd := &cobra.Command{
		Use:   "capacity",
		Short: "Raw, preservation, usable and overhead capacity of pools",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			pools, err := f.pools()
			if err != nil {
				return err
			}
			fmt.Printf("%-22s %6s %10s %12s %10s %10s %10s %9s %s\n", "pool", "drives", "raw", "preservation", "unused", "parity", "usable", "overhead", "survives a domain")
			var bars []bench.Series
			var cats []string
			for _, p := range pools {
				c, err := plan.CapacityOf(p)
				if err != nil {
					return err
				}
				dom := "-"
				if p.Servers > 0 {
					dom = strconv.FormatBool(c.DomainLoss)
				}
				fmt.Printf("%-22s %6d %10s %12s %10s %10s %10s %8.1f%% %s\n", poolName(p), p.Drives, human(c.Raw), human(c.Preservation),
					human(c.Unused), human(c.Parity), human(c.Usable), 100*c.Overhead, dom)
				cats = append(cats, fmt.Sprintf("%d %s", p.Drives, poolName(p)))
				for i, v := range []struct {
					name string
					b    int64
				}{{"usable", c.Usable}, {"parity", c.Parity}, {"preservation", c.Preservation}, {"unused", c.Unused}} {
					if len(bars) <= i {
						bars = append(bars, bench.Series{Name: v.name})
					}
					bars[i].Y = append(bars[i].Y, float64(v.b)/(1<<40))
				}
			}
			if svg != "" {
				ch := &bench.BarChart{Title: "Pool capacity", XLabel: "pool", YLabel: "TiB", Categories: cats, Series: bars}
				var b bytes.Buffer
				if err := ch.WriteSVG(&b); err != nil {
					return err
				}
				if err := os.WriteFile(svg, b.Bytes(), 0o644); err != nil {
					return err
				}
				fmt.Printf("wrote %s\n", svg)
			}
			return nil
		},
	}
	f.add(cmd)
	cmd.Flags().StringVar(&svg, "svg", "", "write a bar chart of the table to this file")
	return cmd
}
