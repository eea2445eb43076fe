package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"poolfs/internal/cluster"
	"poolfs/internal/clustermap"
	"poolfs/internal/mgmt"
)

func rebuildCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "rebuild", Short: "Rebuild and rebalance progress"}
	cmd.AddCommand(&cobra.Command{
		Use:   "status",
		Short: "Degraded and critical stripes, and the running rebuild: percent, bytes, rate, ETA",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withConn(cmd, func(conn *cluster.Conn) error {
				st, err := conn.Mgmt.Rebuild(cmd.Context())
				if err != nil {
					return err
				}
				printRebuild(os.Stdout, st)
				return nil
			})
		},
	}, &cobra.Command{
		Use:   "watch",
		Short: "A live progress bar of the running rebuild or rebalance, until it ends",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withConn(cmd, func(conn *cluster.Conn) error {
				// The coordinator's counts describe the map of its last
				// scan: right after `drive fail` they are the old map's, so
				// "nothing to do" counts only from a scan of this map on.
				m, err := conn.Mgmt.Map(cmd.Context())
				if err != nil {
					return err
				}
				var b *bar
				seen := false
				for {
					st, err := conn.Mgmt.Rebuild(cmd.Context())
					if err != nil {
						return err
					}
					if st.Active {
						if b == nil {
							b = newBar(st.Bytes, st.Kind, false)
							seen = true
						}
						b.set(st.BytesDone)
					} else if st.Epoch >= m.Epoch && (seen || st.Degraded+st.Critical+st.Misplaced == 0 || st.Incomplete != "") {
						if b != nil {
							b.finish()
						}
						printRebuild(os.Stdout, st)
						return nil
					}
					select {
					case <-cmd.Context().Done():
						return nil
					case <-time.After(250 * time.Millisecond):
					}
				}
			})
		},
	})
	return cmd
}

// printRebuild is the health/rebuild part of `poolfs status`.
func printRebuild(w io.Writer, st *mgmt.RebuildStatus) {
	age := ""
	if st.Scanned > 0 {
		age = fmt.Sprintf(" (checked %v ago)", time.Since(time.Unix(0, st.Scanned)).Round(time.Second))
	}
	fmt.Fprintf(w, "stripes%s: %d, degraded %d, critical %d, lost %d, to rebalance %d, blocked %d\n",
		age, st.Stripes, st.Degraded, st.Critical, st.LostStripes, st.Misplaced, st.Blocked)
	if st.ReadRepairs > 0 {
		fmt.Fprintf(w, "read repairs: %d fragments found damaged or missing by readers and rewritten\n", st.ReadRepairs)
	}
	if st.Unavailable > 0 {
		fmt.Fprintf(w, "on down drives: %d stripes (not rebuilt while the drive may come back", st.Unavailable)
		if st.Waiting > 0 {
			fmt.Fprintf(w, "; %d wait for it to rebuild what else they lost", st.Waiting)
		}
		fmt.Fprintln(w, ")")
	}
	if st.Active {
		eta := "-"
		if st.ETA > 0 {
			eta = time.Duration(st.ETA * float64(time.Second)).Round(time.Second).String()
		}
		fmt.Fprintf(w, "%s: %.1f%% (%s of %s), %s/s, ETA %s, %d/%d tasks (%d skipped: rewritten, %d failed), priority %s (%d tasks running, up to %d per drive)\n",
			st.Kind, st.Percent(), human(st.BytesDone), human(st.Bytes), human(int64(st.Rate)), eta,
			st.Done, st.Tasks, st.Skipped, st.Failed, st.Priority, st.Running, st.Depth)
	} else if st.LastSeconds > 0 && st.Incomplete == "" {
		fmt.Fprintf(w, "no rebuild running; the last one took %s\n", time.Duration(st.LastSeconds*float64(time.Second)).Round(time.Millisecond))
	}
	if st.Incomplete != "" {
		fmt.Fprintf(w, "REBUILD CANNOT FINISH: %s\n", st.Incomplete)
	}
	for _, f := range st.Lost {
		name := f.Path
		if name == "" {
			name = fmt.Sprintf("inode %d", f.Ino)
		}
		fmt.Fprintf(w, "DATA LOST: %s (inode %d), stripes %v\n", name, f.Ino, f.Stripes)
	}
}

// addPoolSet adds `pool set` to the pool command of root.
func addPoolSet(root *cobra.Command, g *globals) {
	for _, c := range root.Commands() {
		if c.Name() == "pool" {
			c.AddCommand(poolSetCmd(g))
		}
	}
}

func poolSetCmd(g *globals) *cobra.Command {
	var pool string
	cmd := &cobra.Command{
		Use:   "set rebuild-priority " + strings.Join(clustermap.Priorities, "|") + " | down-grace DURATION | small-file-threshold SIZE",
		Short: "Change a pool setting: rebuild-priority (takes effect during a running rebuild), down-grace or small-file-threshold",
		Long: `Change a pool setting.

  rebuild-priority lowest|low|medium|high|highest
      trades rebuild speed against client I/O; takes effect during a running rebuild
  down-grace DURATION
      how long a drive that stops answering stays down (not rebuilt) before it
      is declared failed and rebuilt, e.g. 10m (the default), 90s, 1h
  small-file-threshold SIZE
      files of at most this size are mirrored (1+M copies) rather than
      erasure-coded, and move to erasure coding as they grow; 0 turns it off`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var grace time.Duration
			var threshold int64
			switch args[0] {
			case "small-file-threshold":
				var err error
				if threshold, err = parseSmallFileThreshold(args[1]); err != nil { // stripe.go
					return err
				}
			case "rebuild-priority":
				if _, err := clustermap.ParsePriority(args[1]); err != nil {
					return err
				}
			case "down-grace":
				var err error
				if grace, err = clustermap.ParseDownGrace(args[1]); err != nil {
					return err
				}
			default:
				return fmt.Errorf("unknown setting %q: want rebuild-priority, down-grace or small-file-threshold", args[0])
			}
			return g.withConn(cmd, func(conn *cluster.Conn) error {
				if pool == "" {
					m, err := conn.Mgmt.Map(cmd.Context())
					if err != nil {
						return err
					}
					pool = m.Pools[0].Name
				}
				switch args[0] {
				case "down-grace":
					if err := conn.Mgmt.SetDownGrace(cmd.Context(), pool, grace); err != nil {
						return err
					}
					fmt.Printf("pool %s: down drives are declared failed after %v\n", pool, grace)
					return nil
				case "small-file-threshold":
					if err := conn.Mgmt.SetSmallFileThreshold(cmd.Context(), pool, threshold); err != nil {
						return err
					}
					fmt.Printf("pool %s: small-file threshold %s\n", pool, human(threshold))
					return nil
				}
				if err := conn.Mgmt.SetRebuildPriority(cmd.Context(), pool, args[1]); err != nil {
					return err
				}
				fmt.Printf("pool %s: rebuild priority %s\n", pool, args[1])
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&pool, "pool", "", "pool (default: the first)")
	return cmd
}
