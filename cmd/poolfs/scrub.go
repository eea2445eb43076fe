package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"poolfs/internal/mgmt"
)

func scrubCmd(g *globals) *cobra.Command {
	var pool string
	var wait bool
	cmd := &cobra.Command{Use: "scrub", Short: "Verify every fragment's checksums and every stripe's parity, and repair what is bad"}
	run := func(op string) func(cmd *cobra.Command, args []string) error {
		return func(cmd *cobra.Command, args []string) error {
			conn, err := g.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer conn.Close()
			st, err := conn.Mgmt.Scrub(cmd.Context(), op, pool)
			if err != nil {
				return err
			}
			for wait && st.Active {
				select {
				case <-cmd.Context().Done():
					return nil
				case <-time.After(500 * time.Millisecond):
				}
				if st, err = conn.Mgmt.Scrub(cmd.Context(), "status", pool); err != nil {
					return err
				}
			}
			printScrub(os.Stdout, st)
			return nil
		}
	}
	start := &cobra.Command{Use: "start", Short: "Start a background scrub of a pool (at its rebuild priority)", Args: cobra.NoArgs, RunE: run("start")}
	start.Flags().StringVar(&pool, "pool", "", "pool to scrub (default: the first)")
	start.Flags().BoolVar(&wait, "wait", false, "wait until the scrub ends")
	status := &cobra.Command{Use: "status", Short: "Progress and findings of the running or last scrub", Args: cobra.NoArgs, RunE: run("status")}
	status.Flags().BoolVar(&wait, "wait", false, "wait until the scrub ends")
	stop := &cobra.Command{Use: "stop", Short: "Stop the running scrub", Args: cobra.NoArgs, RunE: run("stop")}
	cmd.AddCommand(start, status, stop)
	return cmd
}

func printScrub(w io.Writer, st *mgmt.ScrubStatus) {
	if st.Started == 0 {
		fmt.Fprintln(w, "scrub: never run")
		return
	}
	state := "running"
	switch {
	case st.Active:
	case st.Stopped:
		state = "stopped"
	default:
		state = "finished"
	}
	fmt.Fprintf(w, "scrub of pool %s %s (started %s, priority %s): %d/%d stripes checked, %s read, %s/s, %d skipped\n",
		st.Pool, state, time.Unix(0, st.Started).Format(time.DateTime), st.Priority, st.Checked, st.Stripes,
		human(st.Bytes), human(int64(st.Rate)), st.Skipped)
	fmt.Fprintf(w, "bad fragments: %d (%d missing, %d checksum, %d parity-inconsistent), %d repaired\n",
		st.Bad, st.Missing, st.Checksum, st.Inconsistent, st.Repaired)
	for _, f := range st.Unrecoverable {
		name := f.Path
		if name == "" {
			name = fmt.Sprintf("inode %d", f.Ino)
		}
		fmt.Fprintf(w, "UNRECOVERABLE: %s (inode %d), stripes %v\n", name, f.Ino, f.Stripes)
	}
	if st.LastError != "" {
		fmt.Fprintf(w, "error: %s\n", st.LastError)
	}
}
