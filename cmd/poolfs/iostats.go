package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"poolfs/internal/client"
	"poolfs/internal/fusefs"
	"poolfs/internal/iostats"
	"poolfs/internal/metrics"
)

// statsFlags are the per-job statistics options of a mount.
type statsFlags struct {
	jobVars  string
	interval time.Duration
	reg      prometheus.Registerer // if set, the mount's totals are exported there
}

func (f *statsFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.jobVars, "jobid-var", iostats.DefaultJobVars,
		"environment variables of the calling process that name its job, tried in order (as Lustre's jobid_var); "+
			iostats.JobProcnameUID+": command.uid; "+iostats.JobDisable+": no jobs")
	cmd.Flags().DurationVar(&f.interval, "stats-interval", 2*time.Second,
		"how often the mount reports its operations per job to the management service (0: never)")
}

// start counts the mount's operations per job in o (and exports them with
// what held cl's writers back, if f.reg is set) and, every interval,
// reports them with send. The returned function stops reporting after a
// last report; call it once the file system is unmounted.
func (f *statsFlags) start(o *fusefs.Options, cl *client.Client, mountDir string, send iostats.Sender) (func(), error) {
	vars, err := iostats.ParseJobVars(f.jobVars)
	if err != nil {
		return nil, fmt.Errorf("--jobid-var: %w", err)
	}
	if f.interval < 0 {
		return nil, fmt.Errorf("--stats-interval %v: want a positive duration or 0", f.interval)
	}
	o.Stats, o.Jobs = iostats.NewRecorder(), iostats.NewJobResolver(vars, "")
	if f.reg != nil {
		f.reg.MustRegister(metrics.ClientCollector(o.Stats))
		f.reg.MustRegister(metrics.ClientHeldCollector(func() []metrics.Held { return heldSeries(cl.Held()) }))
	}
	if f.interval == 0 {
		return func() {}, nil
	}
	host, _ := os.Hostname()
	rep := iostats.NewReporter(o.Stats, host, mountDir, send, o.Logger)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		rep.Run(ctx, f.interval)
	}()
	return func() { cancel(); wg.Wait() }, nil
}

// heldSeries is h as the series of metrics.ClientHeldCollector.
func heldSeries(h client.HeldStats) []metrics.Held {
	return []metrics.Held{
		{Reason: "garbage", Waits: h.Garbage.Waits, Seconds: h.Garbage.Wait.Seconds()},
		{Reason: "folds", Waits: h.Folds.Waits, Seconds: h.Folds.Wait.Seconds()},
	}
}
