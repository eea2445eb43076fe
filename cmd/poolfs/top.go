package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"poolfs/internal/cluster"
	"poolfs/internal/iostats"
	"poolfs/internal/mgmt"
)

func topCmd(g *globals) *cobra.Command {
	var once, asJSON bool
	var every time.Duration
	var jobs int
	cmd := &cobra.Command{
		Use:   "top",
		Short: "The busiest clients and jobs: operations/s, MB/s read and written, p50/p99 latency",
		Long: `Show the clients (mounts) and the jobs that use the cluster most, refreshed every
--interval until Ctrl-C. A job is the value of an environment variable of the calling
process (the mount's --jobid-var, default SLURM_JOB_ID, then PBS_JOBID, LSB_JOBID);
"-" counts callers without one. Rates and latency percentiles are over the last 10 s
the management service keeps; totals since the client or job was first seen.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if every <= 0 {
				return fmt.Errorf("--interval %v: want a positive duration", every)
			}
			return g.withConn(cmd, func(conn *cluster.Conn) error {
				clear := !once && !asJSON && term.IsTerminal(int(os.Stdout.Fd()))
				for {
					snap, err := conn.Mgmt.IOStats(cmd.Context(), jobs)
					if err != nil {
						return err
					}
					if asJSON {
						enc := json.NewEncoder(os.Stdout)
						enc.SetIndent("", "  ")
						if err := enc.Encode(snap); err != nil {
							return err
						}
					} else {
						if clear {
							fmt.Print("\033[H\033[2J")
						}
						printTop(os.Stdout, snap)
					}
					if once {
						return nil
					}
					select {
					case <-cmd.Context().Done():
						return nil
					case <-time.After(every):
					}
					if !clear && !asJSON {
						fmt.Println()
					}
				}
			})
		},
	}
	f := cmd.Flags()
	f.BoolVar(&once, "once", false, "print once and exit (for scripts)")
	f.BoolVar(&asJSON, "json", false, "machine-readable output")
	f.DurationVar(&every, "interval", 2*time.Second, "refresh period")
	f.IntVar(&jobs, "jobs", mgmt.DefaultTopJobs, "busiest jobs to show (0: all)")
	return cmd
}

// printTop writes the clients' and jobs' tables.
func printTop(w io.Writer, s *mgmt.IOStatsSnapshot) {
	fmt.Fprintf(w, "poolfs top   %s   %d clients, %d jobs   rates over the last %gs\n\n",
		time.Unix(0, s.At).Format("15:04:05"), len(s.Clients), s.JobsTotal, s.WindowSec)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "CLIENT\tOPS/S\tREAD MB/S\tWRITE MB/S\tP50\tP99\tREAD\tWRITTEN\t")
	for _, r := range s.Clients {
		topRow(tw, r.Name, &r)
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "JOB\tCLIENTS\tOPS/S\tREAD MB/S\tWRITE MB/S\tP50\tP99\tREAD\tWRITTEN\t")
	for _, r := range s.Jobs {
		name := r.Name
		if name == "" {
			name = "-"
		}
		topRow(tw, name+"\t"+fmt.Sprint(r.Clients), &r)
	}
	tw.Flush()
	if len(s.Jobs) < s.JobsTotal {
		fmt.Fprintf(w, "(%d more jobs: --jobs 0 shows all)\n", s.JobsTotal-len(s.Jobs))
	}
}

func topRow(w io.Writer, lead string, r *iostats.Row) {
	fmt.Fprintf(w, "%s\t%.1f\t%.2f\t%.2f\t%s\t%s\t%s\t%s\t\n", lead, r.OpsPerSec(),
		r.ReadBytesPerSec/1e6, r.WriteBytesPerSec/1e6, latency(r.P50), latency(r.P99),
		human(int64(r.ReadBytes)), human(int64(r.WriteBytes)))
}

// latency formats seconds as µs, ms or s; "-" for none.
func latency(sec float64) string {
	switch {
	case sec <= 0:
		return "-"
	case sec < 1e-3:
		return fmt.Sprintf("%.0fµs", sec*1e6)
	case sec < 1:
		return fmt.Sprintf("%.1fms", sec*1e3)
	default:
		return fmt.Sprintf("%.2fs", sec)
	}
}
