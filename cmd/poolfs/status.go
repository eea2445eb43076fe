package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"poolfs/internal/cluster"
	"poolfs/internal/mgmt"
)

func statusCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Health, capacity, drives and PG balance of the cluster",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withConn(cmd, func(conn *cluster.Conn) error {
				st, err := conn.Mgmt.Status(cmd.Context())
				if err != nil {
					return err
				}
				if asJSON {
					enc := json.NewEncoder(os.Stdout)
					enc.SetIndent("", "  ")
					return enc.Encode(st)
				}
				fmt.Printf("cluster: %s   health: %s   map epoch: %d\n", st.Name, strings.ToUpper(st.Health), st.Epoch)
				for _, n := range st.Notes {
					fmt.Printf("! %s\n", n)
				}
				printPools(os.Stdout, st)
				printRebuild(os.Stdout, &st.Rebuild)
				if m, err := conn.Mgmt.Map(cmd.Context()); err == nil {
					printServers(os.Stdout, m)
				}
				printDrives(os.Stdout, st)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "machine-readable output")
	return cmd
}

func printPools(w io.Writer, st *mgmt.Status) {
	for _, p := range st.Pools {
		c := p.Capacity
		fmt.Fprintf(w, "pool %d %q: %s, %s %s, unit %s, %d PGs, %d/%d drives up, health %s\n",
			p.ID, p.Name, p.Layout, "ec", p.Scheme, human(int64(p.Unit)), p.PGs, p.DrivesUp, p.Drives, strings.ToUpper(p.Health))
		for _, n := range p.Notes {
			fmt.Fprintf(w, "  ! %s\n", n)
		}
		pct := 0.0
		if c.UsableRaw > 0 {
			pct = 100 * float64(int64(p.UsedRaw)+p.Reclaimable) / float64(c.UsableRaw)
		}
		failed := ""
		if p.FailedRaw > 0 {
			failed = fmt.Sprintf(" (%s on failed drives not counted)", human(p.FailedRaw))
		}
		pres := fmt.Sprintf("preservation %s (%d drives)", human(c.Preservation), p.Preservation)
		if c.Preservation < p.PreservationReserved {
			pres = fmt.Sprintf("preservation left %s of %s (%d drives)", human(c.Preservation), human(p.PreservationReserved), p.Preservation)
		}
		fmt.Fprintf(w, "  capacity: raw %s%s, %s, usable %s\n", human(c.Raw), failed, pres, human(c.Usable))
		fmt.Fprintf(w, "  used: %s of data (%s raw) + %s raw reclaimable = %.1f%% of usable raw\n",
			human(int64(p.UsedUser)), human(int64(p.UsedRaw)), human(p.Reclaimable), pct)
		if p.Reclaimable > 0 {
			fmt.Fprintf(w, "    (reclaimable: on the drives beyond the committed data: removed or replaced data awaiting collection,\n"+
				"     writes not yet committed, fragment and segment headers, preallocated segment space)\n")
		}
		if p.Kept > 0 {
			fmt.Fprintf(w, "    (of which %s kept for reuse: removed small files' space the next small files are written into,\n"+
				"     at most 16 MiB a drive)\n", human(p.Kept))
		}
		fmt.Fprintf(w, "  PG balance: busiest drive %.2fx the mean; down drives are failed after %v\n", p.PGBalance,
			time.Duration(p.DownGrace*float64(time.Second)))
		if len(p.HotSpareFor) > 0 {
			var parts []string
			for g, sp := range p.HotSpareFor {
				parts = append(parts, g+" -> "+sp)
			}
			sort.Strings(parts)
			fmt.Fprintf(w, "  hot spares in use: %s\n", strings.Join(parts, ", "))
		}
	}
}

func printDrives(w io.Writer, st *mgmt.Status) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "drive\tserver\tstate\tcapacity\tused\tfill\ton host\tfragments\tPG slots\t")
	for _, d := range st.Drives {
		fill, onHost := 0.0, "-"
		if d.Capacity > 0 {
			fill = 100 * float64(max(d.Used, d.Allocated)) / float64(d.Capacity) // what it takes counts
		}
		if d.Allocated > 0 {
			onHost = human(d.Allocated)
		}
		state := string(d.State)
		switch {
		case d.State == "down":
			left := time.Duration(d.GraceLeft * float64(time.Second)).Round(time.Second)
			state += fmt.Sprintf(" (failed in %v unless it answers)", left)
		case d.Error != "":
			state += " (" + d.Error + ")"
		}
		if d.Slow != "" {
			state += " (" + d.Slow + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%5.1f%% %s\t%s\t%d\t%d\t\n", d.ID, d.Server, state, human(d.Capacity),
			human(d.Used), fill, fillBar(fill), onHost, d.Fragments, d.PGSlots)
	}
	tw.Flush()
}

func fillBar(pct float64) string {
	n := int(pct/10 + 0.5)
	n = max(0, min(10, n))
	return "[" + strings.Repeat("#", n) + strings.Repeat(".", 10-n) + "]"
}

func gcCmd(g *globals) *cobra.Command {
	var a mgmt.GCArgs
	cmd := &cobra.Command{
		Use:   "gc",
		Short: "Collect garbage now: replaced generations, and with --orphans fragments never committed",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withConn(cmd, func(conn *cluster.Conn) error {
				rep, err := conn.Mgmt.GC(cmd.Context(), a)
				if err != nil {
					return err
				}
				fmt.Printf("gc: %d queued generations (%d fragments deleted), %d orphan fragments of %d scanned, %d unfinished puts, in %s\n",
					rep.Queued, rep.Fragments, rep.Orphans, rep.Scanned, rep.TempFiles, time.Duration(rep.DurationNanos).Round(time.Millisecond))
				if rep.Left > 0 {
					fmt.Printf("gc: %d fragments of those generations left: on no drive (failed or removed), or their stripe's again\n", rep.Left)
				}
				for _, e := range rep.Errors {
					fmt.Fprintln(os.Stderr, "gc:", e)
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&a.Orphans, "orphans", false, "also scan every drive for uncommitted fragments and remove unfinished puts")
	cmd.Flags().DurationVar(&a.Grace, "grace", 10*time.Minute, "only collect orphans older than this (writes in flight are younger)")
	return cmd
}

// human formats bytes with binary units.
func human(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

func rate(n int64, d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f MiB/s", float64(n)/d.Seconds()/(1<<20))
}

// parseSize parses 512, 4k, 100M, 2G, 1T (binary units).
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(strings.ToUpper(s))
	t = strings.TrimSuffix(strings.TrimSuffix(t, "B"), "I")
	mult := int64(1)
	if t != "" {
		if i := strings.IndexByte("KMGTP", t[len(t)-1]); i >= 0 {
			mult = 1 << (10 * (i + 1))
			t = t[:len(t)-1]
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("size %q: want e.g. 4096, 64K, 100M, 2G", s)
	}
	return int64(v * float64(mult)), nil
}
