package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"poolfs/internal/cluster"
	"poolfs/internal/metrics"
)

// storageCmd runs one storage server of a cluster of several machines.
func storageCmd(g *globals) *cobra.Command {
	var cfg cluster.StorageConfig
	var driveSize string
	var join joinFlags
	var verbose, noDirect bool
	var mflag metricsFlag
	cmd := &cobra.Command{
		Use:   "storage",
		Short: "Run a storage server: serve this machine's drives to a cluster of several machines",
		Long: `Serve the drive directories --drive (one per disk) as storage server --server.
With --join-file FILE the machine joins the cluster first with the join token
in FILE (its directory -c DIR is made); later starts need only -c DIR. The server registers its drives with
the management service, with its --rack and --enclosure labels, and keeps
registering every few seconds. New drives join pool --pool once it exists
(` + "`poolfs cluster pool`" + ` makes it).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg.Dir = g.dir
			if err := join.join(g.dir); err != nil {
				return err
			}
			if driveSize != "" {
				n, err := parseSize(driveSize)
				if err != nil {
					return err
				}
				cfg.DriveSize = n
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
			reg := mflag.registry("storage")
			if reg != nil {
				cfg.WrapDrive = metrics.NewDrives(reg).Wrap
				cfg.ObserveRPC = metrics.NewRPC(reg).Observe
			}
			n, err := cluster.StartStorage(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			defer n.Close()
			fmt.Printf("poolfs storage %s: serving %d drives on %s\n", cfg.Server, len(cfg.Drives), n.Addr)
			stopMetrics, err := mflag.serve(reg)
			if err != nil {
				return err
			}
			defer stopMetrics()
			if p := n.Pending(); p > 0 {
				fmt.Printf("%d drives wait for pool %q: run `poolfs cluster pool` once the servers have joined\n", p, cfg.Pool)
			}
			<-cmd.Context().Done()
			return nil
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&cfg.Drives, "drive", nil, "drive directory (repeat for each drive; required)")
	f.StringVar(&cfg.Server, "server", "", "this server's name, unique in the cluster (required)")
	f.StringVar(&cfg.Rack, "rack", "", "failure-domain label: the rack of this server")
	f.StringVar(&cfg.Enclosure, "enclosure", "", "failure-domain label: the enclosure (chassis, shelf) of this server")
	f.StringVar(&cfg.Pool, "pool", "default", "pool that this server's new drives join")
	join.add(cmd, "")
	f.StringVar(&cfg.Listen, "listen", "", "RPC address (required)")
	f.StringVar(&cfg.Advertise, "advertise", "", "address other machines reach this server at (default: --listen)")
	f.StringVar(&driveSize, "drive-size", "", "capacity each drive advertises, e.g. 4T (default: its file system's free space, shared among the drives on it)")
	f.BoolVar(&noDirect, "no-direct-io", false, "use buffered I/O on the drives instead of O_DIRECT")
	f.StringVar(&cfg.DriveModel, "drive-model", "", "emulate the speed of a drive model on every drive of this server: hdd-7200, hdd-10k, hdd-15k, ssd or none (for benchmarks; default: as the map says)")
	f.Float64Var(&cfg.SpeedScale, "drive-speed-scale", 0, "scale the drive model's speed by this factor (0.1 = ten times slower)")
	f.BoolVarP(&verbose, "verbose", "v", false, "log service activity")
	mflag.add(cmd, defaultStorageMetrics)
	_ = cmd.MarkFlagRequired("drive")
	_ = cmd.MarkFlagRequired("server")
	_ = cmd.MarkFlagRequired("listen")
	return cmd
}
