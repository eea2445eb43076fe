package main

import (
	"fmt"
	"os"
	"poolfs/internal/cluster"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

func eventsCmd(g *globals) *cobra.Command {
	var limit int
	cmd := &cobra.Command{
		Use:   "events",
		Short: "The cluster event log: drive failures, rebuild start and end with durations, data loss",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withConn(cmd, func(conn *cluster.Conn) error {
				evs, err := conn.Mgmt.Events(cmd.Context(), 0, 0)
				if err != nil {
					return err
				}
				if limit > 0 && len(evs) > limit {
					evs = evs[len(evs)-limit:]
				}
				tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "time\tevent\tsubject\tduration\tmessage\t")
				for _, e := range evs {
					d := ""
					if e.Duration > 0 {
						d = time.Duration(e.Duration).Round(time.Millisecond).String()
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", time.Unix(0, e.Time).Format("2006-01-02 15:04:05.000"),
						e.Kind, e.Subject, d, e.Message)
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().IntVarP(&limit, "last", "n", 0, "show only the last N events")
	return cmd
}
