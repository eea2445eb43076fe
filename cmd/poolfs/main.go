// Command poolfs is the one binary of poolfs: it starts the services
// (`poolfs up`), moves files in and out, and reports on the cluster.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"poolfs/internal/client"
	"poolfs/internal/cluster"
)

func main() {
	raiseProcs()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRoot()
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "poolfs:", formatError(err))
		code := 1
		switch {
		case errors.Is(err, client.ErrDataLoss):
			code = 3
		case errors.Is(err, client.ErrUnavailable):
			code = 4
		}
		os.Exit(code)
	}
}

// globals are the flags every command shares.
type globals struct {
	dir        string
	cpuprofile string
	// blockprofile and mutexprofile: where the command's goroutines
	// waited (blocked on channels, locks, selects; contended mutexes).
	blockprofile, mutexprofile string
}

func newRoot() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:           "poolfs",
		Short:         "poolfs: a parallel file system on declustered, erasure-coded disk pools",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       versionString(),
	}
	root.SetVersionTemplate("{{.Version}}\n")
	def := os.Getenv("POOLFS_DIR")
	if def == "" {
		def = "./poolfs-data"
	}
	root.PersistentFlags().StringVarP(&g.dir, "cluster", "c", def, "cluster `DIR` written by poolfs up (env POOLFS_DIR)")
	root.PersistentFlags().StringVar(&g.cpuprofile, "cpuprofile", "", "write a CPU profile of this command to the file")
	_ = root.PersistentFlags().MarkHidden("cpuprofile")
	root.PersistentFlags().StringVar(&g.blockprofile, "blockprofile", "", "write a profile of where this command's goroutines blocked to the file")
	_ = root.PersistentFlags().MarkHidden("blockprofile")
	root.PersistentFlags().StringVar(&g.mutexprofile, "mutexprofile", "", "write a profile of this command's contended mutexes to the file")
	_ = root.PersistentFlags().MarkHidden("mutexprofile")
	var prof *os.File
	root.PersistentPreRunE = func(cmd *cobra.Command, args []string) error {
		if g.blockprofile != "" {
			runtime.SetBlockProfileRate(int(10 * time.Microsecond))
		}
		if g.mutexprofile != "" {
			runtime.SetMutexProfileFraction(10)
		}
		if g.cpuprofile == "" {
			return nil
		}
		var err error
		if prof, err = os.Create(g.cpuprofile); err != nil {
			return err
		}
		return pprof.StartCPUProfile(prof)
	}
	root.PersistentPostRun = func(cmd *cobra.Command, args []string) {
		if prof != nil {
			pprof.StopCPUProfile()
			prof.Close()
		}
		for name, path := range map[string]string{"block": g.blockprofile, "mutex": g.mutexprofile} {
			if path == "" {
				continue
			}
			if f, err := os.Create(path); err == nil {
				_ = pprof.Lookup(name).WriteTo(f, 0)
				f.Close()
			}
		}
	}
	root.AddCommand(upCmd(g))
	root.AddCommand(fileCmds(g)...)
	root.AddCommand(statusCmd(g), gcCmd(g), poolCmd(g), metaCmd(g), nullMountCmd())
	root.AddCommand(benchCmd(g))
	root.AddCommand(mountCmd(g), setstripeCmd(g), getstripeCmd(g))
	root.AddCommand(driveCmd(g), rebuildCmd(g), eventsCmd(g), alertsCmd(g))
	root.AddCommand(scrubCmd(g), sessionsCmd(g), versionCmd())
	root.AddCommand(topCmd(g))
	root.AddCommand(fsckCmd(g))
	root.AddCommand(userCmd(g))
	root.AddCommand(planCmd())
	root.AddCommand(clusterCmd(g), mgmtCmd(g), storageCmd(g))
	addPoolSet(root, g)
	addBenchRebuild(root, g)
	addBenchDegraded(root)
	return root
}

// connect opens a connection to the cluster of g.dir.
func (g *globals) connect(ctx context.Context) (*cluster.Conn, error) {
	return cluster.Connect(ctx, g.dir, clientOptions())
}

// withConn runs fn with a connection to the cluster, closed afterwards.
func (g *globals) withConn(cmd *cobra.Command, fn func(conn *cluster.Conn) error) error {
	conn, err := g.connect(cmd.Context())
	if err != nil {
		return err
	}
	defer conn.Close()
	return fn(conn)
}
