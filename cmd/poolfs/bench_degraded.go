package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"poolfs/internal/client"
	"poolfs/internal/cluster"
	"poolfs/internal/clustermap"
	"poolfs/internal/placement"
	"poolfs/internal/storage"
)

// degradedOpts are the flags of `poolfs bench degraded`.
type degradedOpts struct {
	drives int
	scheme string
	model  string
	scale  float64
	size   int64
	unit   uint32
	slow   time.Duration
	reps   int
	drive  int
	// inFlight is the reading client's Options.StripesInFlight; its
	// read-ahead window (Options.ReadAhead) is twice as many stripes.
	inFlight int
}

// degradedRun is one read condition of `poolfs bench degraded`.
type degradedRun struct {
	Name  string    `json:"name"`
	MiBs  []float64 `json:"mib_s"` // every repetition
	Best  float64   `json:"best_mib_s"`
	Ratio float64   `json:"ratio_to_healthy"`
	// DriveReads is, for every repetition, the fragment reads that the
	// drive slowed and then taken down answered during the read (-1: not
	// known, the drive being down): the reads that can hold a stripe.
	DriveReads []int64 `json:"drive_reads"`
}

// addBenchDegraded adds `bench degraded` to the bench command of root.
func addBenchDegraded(root *cobra.Command) {
	for _, c := range root.Commands() {
		if c.Name() == "bench" {
			c.AddCommand(benchDegradedCmd())
		}
	}
}

func benchDegradedCmd() *cobra.Command {
	var o degradedOpts
	var size, unit, out string
	cmd := &cobra.Command{
		Use:   "degraded",
		Short: "Sequential read bandwidth of a healthy pool, with one slow drive, and with one drive down",
		Long: `Start a private cluster on emulated drives, write one file, and read it sequentially (the
client's streaming read, as get does) in three conditions: healthy; with one drive slowed by
--slow on every I/O (drive fault slow); and with that drive down, not yet rebuilt (drive fault
offline: the map marks it down and nothing is rebuilt within the pool's grace; reads treat it as
a failed drive). The conditions take turns for --reps rounds, each read with a new client (no
latency history), and every read is checked against the written bytes (CRC32C). Prints each condition's best MiB/s and its ratio to
healthy, and writes OUT.json.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if o.size, err = parseSize(size); err != nil {
				return err
			}
			u, err := parseSize(unit)
			if err != nil {
				return err
			}
			o.unit = uint32(u)
			runs, err := runDegradedBench(cmd.Context(), o)
			if err != nil {
				return err
			}
			res := map[string]any{"runs": runs, "command": strings.Join(os.Args, " "),
				"drives": o.drives, "scheme": o.scheme, "drive_model": o.model, "drive_speed_scale": o.scale,
				"size": o.size, "slow": o.slow.String()}
			b, _ := json.MarshalIndent(res, "", "  ")
			if err := os.WriteFile(out+".json", b, 0o644); err != nil {
				return err
			}
			fmt.Printf("wrote %s.json\n", out)
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.drives, "drives", 12, "drives in the pool")
	f.StringVar(&o.scheme, "scheme", "8+2", "erasure scheme")
	f.StringVar(&o.model, "drive-model", "hdd-7200", "emulated drive model (none: unthrottled)")
	f.Float64Var(&o.scale, "drive-speed-scale", 0.25, "drive speed factor (smaller: slower drives, so the drives rather than this machine's CPUs are the bottleneck)")
	f.StringVar(&size, "size", "512M", "bytes of the file read")
	f.StringVar(&unit, "unit", "1M", "stripe unit")
	f.DurationVar(&o.slow, "slow", 200*time.Millisecond, "delay added to every I/O of the slow drive")
	f.IntVar(&o.reps, "reps", 3, "rounds: reads per condition (the best counts)")
	f.IntVar(&o.drive, "drive", 3, "the drive slowed, then taken down")
	f.IntVar(&o.inFlight, "stripes-in-flight", 2, "the reading client's StripesInFlight (a read keeps twice as many stripes in flight; fewer: a late fragment is less hidden by the stripes read beside it)")
	f.StringVar(&out, "out", "degraded", "result file prefix (PREFIX.json)")
	return cmd
}

func runDegradedBench(ctx context.Context, o degradedOpts) ([]degradedRun, error) {
	dir, err := os.MkdirTemp("", "poolfs-bench-degraded-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	c, conn, err := benchCluster(ctx, dir, "declustered", o.drives, o.scheme, o.model, o.scale, o.unit, nil)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	defer conn.Close()
	data := make([]byte, o.size)
	rng := rand.NewChaCha8([32]byte{7})
	_, _ = rng.Read(data)
	want := crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli))
	if _, err := conn.Client.Put(ctx, "/degraded", bytes.NewReader(data), client.PutOptions{Size: o.size}); err != nil {
		return nil, fmt.Errorf("write the file: %w", err)
	}
	data = nil
	fmt.Printf("%d drives %s, %s@%g, %s file, unit %s\n", o.drives, o.scheme, o.model, o.scale, human(o.size), human(int64(o.unit)))

	id := placement.DriveID(o.drive)
	// The conditions take turns, so that a machine busy with other work
	// for a while weighs on all of them alike.
	conds := []struct {
		name       string
		start, end []storage.FaultArgs
	}{
		{name: "healthy"},
		{name: fmt.Sprintf("%v slow by %v", id, o.slow),
			start: []storage.FaultArgs{{Drive: id, Op: "slow", Delay: o.slow}},
			end:   []storage.FaultArgs{{Drive: id, Op: "slow", Delay: 0}}},
		{name: fmt.Sprintf("%v down, not rebuilt", id),
			start: []storage.FaultArgs{{Drive: id, Op: "offline"}},
			end:   []storage.FaultArgs{{Drive: id, Op: "online"}}},
	}
	runs := make([]degradedRun, len(conds))
	for rep := range o.reps {
		for i, cd := range conds {
			for _, f := range cd.start {
				if err := c.Mgmt.DriveFault(ctx, f); err != nil {
					return nil, err
				}
			}
			before := driveReads(ctx, c, id)
			mibs, err := readOnce(ctx, dir, want, o.inFlight)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", cd.name, err)
			}
			reads := driveReads(ctx, c, id)
			if reads >= 0 && before >= 0 {
				reads -= before
			} else {
				reads = -1
			}
			for _, f := range cd.end {
				if err := c.Mgmt.DriveFault(ctx, f); err != nil {
					return nil, err
				}
			}
			if err := waitDriveUp(ctx, c, id); err != nil {
				return nil, fmt.Errorf("after %s: %w", cd.name, err)
			}
			runs[i].Name = cd.name
			runs[i].MiBs = append(runs[i].MiBs, mibs)
			runs[i].DriveReads = append(runs[i].DriveReads, reads)
			fmt.Printf("  round %d: %-26s %8.1f MiB/s  %v reads %s\n", rep+1, cd.name, mibs, id, readCount(reads))
		}
	}
	for i := range runs {
		runs[i].Best = slices.Max(runs[i].MiBs)
		runs[i].Ratio = runs[i].Best / runs[0].Best
		fmt.Printf("%-26s best %8.1f MiB/s  ratio to healthy %.2f\n", runs[i].Name, runs[i].Best, runs[i].Ratio)
	}
	return runs, nil
}

// waitDriveUp waits until the map says drive id is up: a drive taken down
// and brought back is marked up only once the failure detector no longer
// flags it slow (its probes while it was slowed did), and the next
// condition, healthy first, must not find it down.
func waitDriveUp(ctx context.Context, c *cluster.Cluster, id placement.DriveID) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		m, err := c.Mgmt.Map(ctx)
		if err != nil {
			return err
		}
		d, err := m.Drive(id)
		if err != nil {
			return err
		}
		if d.State == clustermap.StateUp {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("drive %v is still %s after 30s", id, d.State)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// driveReads returns the fragment reads drive id has answered since its
// server opened it, or -1 if it is not up or does not say.
func driveReads(ctx context.Context, c *cluster.Cluster, id placement.DriveID) int64 {
	ds, err := c.Mgmt.DriveIO(ctx)
	if err != nil {
		return -1
	}
	for _, d := range ds {
		if d.ID == id.String() && d.Error == "" {
			return d.Reads
		}
	}
	return -1
}

func readCount(n int64) string {
	if n < 0 {
		return "-"
	}
	return fmt.Sprint(n)
}

// readOnce reads the bench file with a new client (no latency history) and
// returns its MiB/s, checking the bytes against want.
func readOnce(ctx context.Context, dir string, want uint32, inFlight int) (float64, error) {
	conn, err := cluster.Connect(ctx, dir, client.Options{StripesInFlight: inFlight, ReadAhead: 2 * inFlight})
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	h := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	start := time.Now()
	a, err := conn.Client.Get(ctx, "/degraded", h, client.GetOptions{})
	if err != nil {
		return 0, err
	}
	el := time.Since(start)
	if h.Sum32() != want {
		return 0, fmt.Errorf("read back different bytes (crc32c %08x, want %08x)", h.Sum32(), want)
	}
	return float64(a.Size) / (1 << 20) / el.Seconds(), nil
}
