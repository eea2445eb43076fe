package main

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"time"

	"github.com/spf13/cobra"

	"poolfs/internal/cluster"
	"poolfs/internal/identity"
	"poolfs/internal/meta"
	"poolfs/internal/meta/postgres"
	"poolfs/internal/metarpc"
	"poolfs/internal/metrics"
	"poolfs/internal/rpc"
)

// metaCmd runs a stand-alone, stateless metadata server over a shared
// PostgreSQL store. Any number of them may serve one store.
func metaCmd(g *globals) *cobra.Command {
	var db, listen, advertise string
	var join joinFlags
	var mflag metricsFlag
	cmd := &cobra.Command{
		Use:   "meta",
		Short: "Run a stand-alone metadata server over a shared PostgreSQL store",
		Long: `Run a stateless metadata server. It authenticates clients with the cluster
secret of -c DIR and serves the namespace and stripe map kept in --db.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := refusePasswordArg("--db", db); err != nil {
				return err
			}
			lessGC()
			if err := join.join(g.dir); err != nil {
				return err
			}
			info, secret, err := cluster.ReadInfo(g.dir)
			if err != nil {
				return err
			}
			log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
			eng, err := cluster.OpenEngine(cmd.Context(), g.dir, db, log)
			if err != nil {
				return err
			}
			defer eng.Close()
			if err := cluster.EnsureIdentity(cmd.Context(), g.dir, identity.RoleMeta, "meta@"+listen); err != nil {
				return err
			}
			opts, err := cluster.FollowRevocations(cmd.Context(), g.dir, rpc.ServerOptions{Logger: log, Errors: metarpc.Errors()}, log)
			if err != nil {
				return err
			}
			reg := mflag.registry("meta")
			if reg != nil {
				opts.Observe = metrics.NewRPC(reg).Observe
			}
			srv := rpc.NewServer(secret, opts)
			st := meta.New(eng, meta.Options{Logger: log})
			metarpc.Register(srv, st)
			go st.ReapSessions(cmd.Context(), 5*time.Second)
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return err
			}
			fmt.Printf("poolfs meta: serving %s %s on %s\n", eng.Dialect().Name, postgres.Redact(db), ln.Addr())
			if info.Meta == "" { // a machine that joined: clients find it through the map
				if advertise == "" {
					advertise = ln.Addr().String()
				}
				if err := cluster.AnnounceMeta(cmd.Context(), g.dir, advertise); err != nil {
					ln.Close()
					return err
				}
			}
			stopMetrics, err := mflag.serve(reg)
			if err != nil {
				ln.Close()
				return err
			}
			defer stopMetrics()
			go func() {
				<-cmd.Context().Done()
				srv.Close()
			}()
			return srv.Serve(ln)
		},
	}
	cmd.AddCommand(metaBackupCmd(g), metaRestoreCmd(g))
	cmd.Flags().StringVar(&db, "db", "", "PostgreSQL connection string of the shared metadata store (required; postgres://user@host/db or service=NAME, "+
		"the password by PGPASSWORD, ~/.pgpass or a service file: see docs/postgres.md)")
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:9402", "RPC address")
	join.add(cmd, "; the server then announces itself to the management service")
	cmd.Flags().StringVar(&advertise, "advertise", "", "address clients reach this server at, announced to the management service of a joined cluster (default: --listen)")
	mflag.add(cmd, defaultMetaMetrics)
	_ = cmd.MarkFlagRequired("db")
	return cmd
}

// refusePasswordArg refuses a connection string given by flag that holds a
// password: every local user reads it in ps. The error does not repeat it.
func refusePasswordArg(flag, dsn string) error {
	if postgres.HasPassword(dsn) {
		return fmt.Errorf("the password in %s would be readable by every local user (ps, /proc/PID/cmdline): "+
			"give it by a password file (~/.pgpass, PGPASSFILE or passfile=), a service file (PGSERVICE, PGSERVICEFILE) or PGPASSWORD instead", flag)
	}
	return nil
}

// lessGC lets a metadata server's heap grow to five times what is live
// before it collects (GOGC=400), unless GOGC is set: what it keeps is
// small (connections, the engine's memory of recent reads), and at the
// default the collector and the allocations it slows took about a sixth
// of the server's CPU in a create phase.
func lessGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
}
