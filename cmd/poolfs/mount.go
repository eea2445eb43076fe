package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"poolfs/internal/client"
	"poolfs/internal/cluster"
	"poolfs/internal/fusefs"
	"poolfs/internal/iostats"
	"poolfs/internal/mgmt"
	"poolfs/internal/rpc"
	"poolfs/internal/storage"
)

// mountFlags are the options of `poolfs mount` and `poolfs up --mount`.
type mountFlags struct {
	attrTimeout  time.Duration
	sessionTTL   time.Duration
	allowOther   bool
	cachedWrites bool
	directReads  bool
	uring        bool
	debug        bool
	stats        statsFlags     // per-job statistics (iostats.go)
	cmd          *cobra.Command // to tell whether --uring was given
}

func (f *mountFlags) add(cmd *cobra.Command) {
	cmd.Flags().DurationVar(&f.attrTimeout, "attr-timeout", time.Second, "how long the kernel caches attributes and names (close-to-open between mounts)")
	cmd.Flags().DurationVar(&f.sessionTTL, "session-ttl", fusefs.DefaultSessionTTL, "lease of the mount's client session: if the mount is killed, the files it held open are released this long after")
	cmd.Flags().BoolVar(&f.allowOther, "allow-other", os.Geteuid() == 0, "let other users use the mount (permission bits still apply)")
	cmd.Flags().BoolVar(&f.cachedWrites, "cached-writes", false, "send writes through the kernel's page cache (FUSE's default: slower for large writes, one writer per file at a time)")
	cmd.Flags().BoolVar(&f.directReads, "direct-reads", false, "serve reads without the kernel's page cache, as for O_DIRECT (for streaming readers with large reads; small reads cost a round trip each)")
	f.cmd = cmd
	cmd.Flags().BoolVar(&f.uring, "uring", false, "serve FUSE requests from the kernel's per-CPU io_uring queues (Linux 6.14+, root: turns on the fuse module's enable_uring; falls back to /dev/fuse without). "+
		"Default: on for up --mount with the embedded SQLite metadata (as root), off otherwise: metadata calls are answered on the queue's thread, which suits microsecond calls, not network round trips")
	cmd.Flags().BoolVar(&f.debug, "fuse-debug", false, "log every FUSE request")
	f.stats.add(cmd)
}

func (f *mountFlags) options() fusefs.Options {
	t := f.attrTimeout
	if t == 0 {
		t = -1 // no caching
	}
	return fusefs.Options{
		AttrTimeout: t, EntryTimeout: t, AllowOther: f.allowOther, CachedWrites: f.cachedWrites, DirectReads: f.directReads, URing: f.uring, Debug: f.debug, SessionTTL: f.sessionTTL,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
}

func mountCmd(g *globals) *cobra.Command {
	var mf mountFlags
	var background bool
	var logPath string
	var mflag metricsFlag
	cmd := &cobra.Command{
		Use:   "mount MOUNTPOINT",
		Short: "Mount the file system with FUSE until Ctrl-C, SIGTERM or umount",
		Long: `Mount the cluster's file system on MOUNTPOINT (an existing directory that is not
a poolfs mount already). Any number of mounts of one cluster see one file system,
with close-to-open consistency. Every path-taking command (ls, stat, put, get,
setstripe, ...) accepts paths inside the mount as well as cluster paths.
Ctrl-C or SIGTERM unmounts (lazily if the mount is busy); so does umount MOUNTPOINT.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := mountPoint(args[0]); err != nil {
				notifyMountStarted(err)
				return err
			}
			if background && !isMountChild() {
				return mountInBackground(args[0], logPath)
			}
			conn, err := g.connect(cmd.Context())
			if err != nil {
				notifyMountStarted(err)
				return err
			}
			defer conn.Close()
			o := mf.options()
			abs, err := filepath.Abs(args[0])
			if err != nil {
				return err
			}
			reg := mflag.registry("mount")
			if reg != nil {
				mf.stats.reg = reg
			}
			stopStats, err := mf.stats.start(&o, conn.Client, abs, conn.Mgmt.ReportIO)
			if err != nil {
				notifyMountStarted(err)
				return err
			}
			defer stopStats()
			stopMetrics, err := mflag.serve(reg)
			if err != nil {
				notifyMountStarted(err)
				return err
			}
			defer stopMetrics()
			return serveMount(cmd.Context(), conn.Client, args[0], o)
		},
	}
	mf.add(cmd)
	cmd.Flags().BoolVar(&background, "background", false, "detach: return once the file system is mounted, keep serving it in a background process (umount MOUNTPOINT stops it)")
	mflag.add(cmd, "")
	cmd.Flags().StringVar(&logPath, "log", "", "with --background: append the mount's messages to this file (default: discard)")
	return cmd
}

// serveMount mounts c on dir and serves until ctx is done (then unmounts)
// or the file system is unmounted from outside.
func serveMount(ctx context.Context, c *client.Client, dir string, o fusefs.Options) error {
	abs, err := mountPoint(dir)
	if err != nil {
		notifyMountStarted(err)
		return err
	}
	srv, err := fusefs.Mount(abs, c, o)
	if err != nil {
		notifyMountStarted(err)
		return err
	}
	announceMount(fmt.Sprintf("poolfs mounted on %s (Ctrl-C or umount %s to stop)", dir, dir), srv)
	notifyMountStarted(nil)
	done := make(chan struct{})
	go func() {
		srv.Wait()
		close(done)
	}()
	select {
	case <-done:
		fmt.Printf("poolfs: %s unmounted\n", dir)
		return nil
	case <-ctx.Done():
	}
	fmt.Printf("poolfs: unmounting %s\n", dir)
	return srv.Unmount()
}

// mountUp mounts the cluster that `poolfs up` just started in this process.
// Metadata calls go to the cluster's Store directly, not over RPC (a
// metadata round trip on loopback costs as much as the transaction); the
// map comes from the management service in process too, and fragments of
// this process's drives are read and written in process (no socket: two
// copies and a TCP stack fewer per byte); any other drive is reached over
// RPC as from any client. The caller
// calls the returned function (unmount, disconnect) before stopping the
// cluster.
func mountUp(c *cluster.Cluster, dir string, mf mountFlags) (func(), error) {
	secret := c.Secret()
	abs, err := mountPoint(dir)
	if err != nil {
		return nil, err
	}
	dialer := storage.NewDialer(secret, rpc.ClientOptions{})
	opts := clientOptions()
	opts.Logger = c.Config.Logger                                       // the mount's warnings go where the services' do
	opts.OnRepair = mgmt.NewRepairBatcher(c.Mgmt, time.Second).Repaired // counted in status and events
	cl := client.New(c.Store, c.Mgmt, c.InProcessDrives(dialer), opts)
	if !mf.cmd.Flags().Changed("uring") {
		// Metadata in process (SQLite) answers in microseconds, fit for
		// the queue's thread; PostgreSQL's round trips are not: they
		// hold up every other request of the CPU's queue while they
		// wait.
		mf.uring = os.Geteuid() == 0 && c.Config.Meta == ""
	}
	o := mf.options()
	stopStats, err := mf.stats.start(&o, cl, abs, func(_ context.Context, r *iostats.Report) error {
		c.Mgmt.ReportIO(r)
		return nil
	})
	if err != nil {
		dialer.Close()
		return nil, err
	}
	srv, err := fusefs.Mount(abs, cl, o)
	if err != nil {
		stopStats()
		dialer.Close()
		return nil, err
	}
	announceMount("poolfs mounted on "+dir, srv)
	return func() {
		if err := srv.Unmount(); err != nil {
			fmt.Fprintln(os.Stderr, "poolfs:", err)
		}
		cl.Close() // its folds and repairs, before the drives close
		stopStats()
		dialer.Close()
	}, nil
}

// mountPoint checks that dir can take a poolfs mount and returns it as an
// absolute path (the path the client session records, which lets
// commands given a path inside the mount find its cluster).
func mountPoint(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if err := checkNotMounted(abs); err != nil {
		return "", err
	}
	return abs, nil
}

// clientOptions are the data path options of every client this process
// makes (POOLFS_INFLIGHT sets StripesInFlight, POOLFS_READAHEAD the
// read-ahead window in stripes, POOLFS_DELTA_BUDGET the delta bytes a file
// keeps before it folds, POOLFS_FOLDS the stripes folded at once,
// POOLFS_LOG_CACHE the bytes of its log stripes a client keeps in memory
// (negative: none), POOLFS_GARBAGE_LIMIT the collector's queue in raw
// bytes that writes over committed generations wait on (negative: no
// limit), POOLFS_NO_DELTAS=1 turns the delta log off: for experiments).
func clientOptions() client.Options {
	o := client.Options{NoDeltas: os.Getenv("POOLFS_NO_DELTAS") == "1"}
	if v, err := strconv.ParseInt(os.Getenv("POOLFS_DELTA_BUDGET"), 10, 64); err == nil {
		o.DeltaBudget = v
	}
	if v, err := strconv.Atoi(os.Getenv("POOLFS_INFLIGHT")); err == nil {
		o.StripesInFlight = v
	}
	if v, err := strconv.Atoi(os.Getenv("POOLFS_FOLDS")); err == nil {
		o.FoldsInFlight = v
	}
	if v, err := strconv.ParseInt(os.Getenv("POOLFS_LOG_CACHE"), 10, 64); err == nil {
		o.LogCache = v
	}
	if v, err := strconv.ParseInt(os.Getenv("POOLFS_GARBAGE_LIMIT"), 10, 64); err == nil {
		o.GarbageLimit = v
	}
	if v, err := strconv.Atoi(os.Getenv("POOLFS_READAHEAD")); err == nil {
		o.ReadAhead = v
	}
	return o
}
