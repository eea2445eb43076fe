package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"poolfs/internal/cluster"
	"poolfs/internal/meta/postgres"
	"poolfs/internal/metrics"
)

// mgmtCmd runs the management service of a cluster of several machines.
func mgmtCmd(g *globals) *cobra.Command {
	var cfg cluster.MgmtConfig
	var verbose bool
	var df dashFlags
	var mflag metricsFlag
	cmd := &cobra.Command{
		Use:   "mgmt",
		Short: "Run the management service of a cluster of several machines (map, failure detection, rebuild, collector, scrub)",
		Long: `Run the management service of the cluster made by ` + "`poolfs cluster create -c DIR`" + `.
It keeps the cluster map in the PostgreSQL database --db (the one the metadata
servers serve), admits storage servers that join, detects failed drives and
servers and rebuilds them. Several may run, one per address given to cluster
create --mgmt: the one holding the database's lease leads, the others stand by
and take over within 10 s of its death (docs/multihost.md).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := refusePasswordArg("--db", cfg.DB); err != nil {
				return err
			}
			cfg.Dir = g.dir
			if err := df.check(cmd); err != nil {
				return err
			}
			level := slog.LevelWarn
			if verbose {
				level = slog.LevelInfo
			}
			cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
			reg := mflag.registry("mgmt")
			if reg != nil {
				cfg.ObserveRPC = metrics.NewRPC(reg).Observe
			}
			cfg.OnLeadership = func(leading bool, term uint64, leader string) {
				switch {
				case leading:
					fmt.Printf("poolfs mgmt: leading (lease term %d)\n", term)
				case leader != "":
					fmt.Printf("poolfs mgmt: standing by; the leader is %s\n", leader)
				default:
					fmt.Printf("poolfs mgmt: standing by\n")
				}
			}
			n, err := cluster.StartMgmt(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			defer n.Close()
			fmt.Printf("poolfs mgmt: serving on %s over %s\n", n.Addr, postgres.Redact(cfg.DB))
			if reg != nil {
				reg.MustRegister(n.Mgmt.Collector())
			}
			stopMetrics, err := mflag.serve(reg)
			if err != nil {
				return err
			}
			defer stopMetrics()
			stopDash, err := startDashboard(cmd.Context(), g.dir, n.Secret(), df, cfg.Logger)
			if err != nil {
				return err
			}
			defer stopDash()
			<-cmd.Context().Done()
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.DB, "db", "", "PostgreSQL connection string of the cluster's database (required; the password by PGPASSWORD, ~/.pgpass or a service file: see docs/postgres.md)")
	f.StringVar(&cfg.Listen, "listen", "", "RPC address: the one given to cluster create --mgmt (required)")
	f.DurationVar(&cfg.HealthInterval, "health-interval", 0, "how often every drive is probed (default 1s)")
	f.DurationVar(&cfg.CertLifetime, "cert-lifetime", 0, "how long the node certificates this service issues are valid; nodes renew theirs in the last third (default 8760h, a year)")
	f.BoolVarP(&verbose, "verbose", "v", false, "log service activity")
	df.add(cmd)
	mflag.add(cmd, defaultUpMetrics)
	_ = cmd.MarkFlagRequired("db")
	_ = cmd.MarkFlagRequired("listen")
	return cmd
}
