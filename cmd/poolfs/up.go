package main

import (
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"poolfs/internal/cluster"
	"poolfs/internal/meta/postgres"
	"poolfs/internal/metrics"
)

func upCmd(g *globals) *cobra.Command {
	var cfg cluster.Config
	var driveSize, unit, preservation string
	var verbose, noDirect bool
	var mountDir string
	var mf mountFlags
	var df dashFlags
	var mflag metricsFlag
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Start a one-machine cluster: management, metadata (SQLite) and a storage server with emulated drives",
		Long: `Start a one-machine cluster in one process on loopback. The first start creates
the cluster (pool settings apply then); later starts on the same directory resume it
with all its data. Ctrl-C or SIGTERM stops it cleanly.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg.Dir = g.dir
			if err := refusePasswordArg("--meta", cfg.Meta); err != nil {
				return err
			}
			if err := df.check(cmd); err != nil {
				return err
			}
			if driveSize != "" {
				n, err := parseSize(driveSize)
				if err != nil {
					return err
				}
				cfg.DriveSize = n
			}
			n, err := parseSize(unit)
			if err != nil || n > 1<<32-1 {
				return fmt.Errorf("--unit %q: want e.g. 1M", unit)
			}
			cfg.Unit = uint32(n)
			if preservation != "auto" {
				p, err := strconv.Atoi(preservation)
				if err != nil || p < 0 {
					return fmt.Errorf("--preservation %q: want a number of drives or auto", preservation)
				}
				cfg.Preservation = p
				if p == 0 {
					cfg.Preservation = cluster.NoPreservation
				}
			}
			if noDirect {
				f := false
				cfg.DirectIO = &f
			}
			level := slog.LevelWarn
			if verbose {
				level = slog.LevelInfo
			}
			cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
			reg := mflag.registry("up")
			if reg != nil {
				cfg.WrapDrive = metrics.NewDrives(reg).Wrap
				cfg.ObserveRPC = metrics.NewRPC(reg).Observe
			}
			c, err := cluster.Start(cmd.Context(), cfg)
			if err != nil {
				return storeAdvice(err, g.dir)
			}
			defer c.Close()
			if reg != nil {
				reg.MustRegister(c.Mgmt.Collector())
				mf.stats.reg = reg // the in-process mount's totals
			}
			st, err := c.Mgmt.Status(cmd.Context())
			if err != nil {
				return err
			}
			fmt.Printf("poolfs %q up: services on %s, cluster directory %s\n", st.Name, c.Addr, c.Config.Dir)
			if cfg.Meta != "" {
				fmt.Printf("metadata: PostgreSQL %s\n", postgres.Redact(cfg.Meta))
			}
			printPools(os.Stdout, st)
			stopDash, err := startDashboard(cmd.Context(), c.Config.Dir, c.Secret(), df, cfg.Logger)
			if err != nil {
				return err
			}
			defer stopDash()
			stopMetrics, err := mflag.serve(reg)
			if err != nil {
				return err
			}
			defer stopMetrics()
			fmt.Printf("try: poolfs -c %s put FILE /FILE ; poolfs -c %s status   (Ctrl-C stops)\n", c.Config.Dir, c.Config.Dir)
			if mountDir != "" {
				unmount, err := mountUp(c, mountDir, mf)
				if err != nil {
					return err
				}
				defer unmount()
			}
			<-cmd.Context().Done()
			fmt.Println("poolfs: stopping")
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Meta, "meta", "", "metadata store: empty for embedded SQLite, or a PostgreSQL connection string (postgres://user@host/db or service=NAME); "+
		"give the password by PGPASSWORD, ~/.pgpass or a service file, not here (see docs/postgres.md)")
	f.StringVar(&cfg.Listen, "listen", "127.0.0.1:9401", "RPC address (port 0 picks a free one)")
	f.IntVar(&cfg.Drives, "drives", 12, "number of emulated drives")
	f.StringVar(&cfg.Scheme, "scheme", "8+2", "erasure scheme K+M of the pool")
	f.StringVar(&unit, "unit", "1M", "stripe unit: bytes of one data fragment of a full stripe")
	f.StringVar(&driveSize, "drive-size", "", "capacity each emulated drive advertises, e.g. 100G (default: free space / drives)")
	f.BoolVar(&cfg.Overcommit, "force", false, "with --drive-size: let the drives advertise more than the disk has free")
	f.StringVar(&preservation, "preservation", "auto", "drives' worth of capacity kept free for rebuilds (auto: grows with the pool, as in Dynamic Disk Pools)")
	f.StringVar(&cfg.Domains, "failure-domain", "", "spread drives over failure domains, e.g. server=4,enclosure=2")
	f.BoolVar(&noDirect, "no-direct-io", false, "use buffered I/O on the drives instead of O_DIRECT")
	f.StringVar((*string)(&cfg.DriveFormat), "drive-format", "", "on-disk format of new drives: files (one file per fragment) or segments (appended to segment files; the default); existing drives keep theirs")
	f.DurationVar(&cfg.MetaCheckInterval, "meta-check-interval", 10*time.Minute, "how often to check the metadata store's integrity while running (a failure stops fragment deletion)")
	f.BoolVarP(&verbose, "verbose", "v", false, "log service activity")
	f.StringVar(&cfg.Layout, "layout", "declustered", "pool layout: declustered, or grouped (RAID-6 style groups of k+m drives, preservation drives as hot spares)")
	f.StringVar(&cfg.DriveModel, "drive-model", "", "emulated drive speed: hdd-7200, hdd-10k, hdd-15k, ssd or none (kept in the map across restarts)")
	f.Float64Var(&cfg.SpeedScale, "drive-speed-scale", 0, "scale the drive model's speed by this factor (0.1 = ten times slower), for small emulated drives")
	f.DurationVar(&cfg.SlowDownAfter, "slow-drive-down-after", 0, "mark a drive flagged slow down once its probes take this long (default 2s)")
	f.StringVar(&mountDir, "mount", "", "also mount the file system on this directory (FUSE), unmounted at exit")
	mf.add(cmd)
	df.add(cmd)
	mflag.add(cmd, defaultUpMetrics)
	return cmd
}
