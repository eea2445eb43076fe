package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"poolfs/internal/clustermap"
)

// printServers prints one line per storage server: its address, labels
// and how many of its drives are in each state.
func printServers(w io.Writer, m *clustermap.Map) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "server\taddress\track\tenclosure\tdrives\tup\tdown\tfailed\tother\t")
	for _, s := range m.Servers {
		n := map[clustermap.DriveState]int{}
		total := 0
		for _, d := range m.Drives {
			if d.Server == s.ID && d.State != clustermap.StateOut {
				n[d.State]++
				total++
			}
		}
		other := total - n[clustermap.StateUp] - n[clustermap.StateDown] - n[clustermap.StateFailed]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t\n", s.ID, s.Addr, dash(s.Rack), dash(s.Enclosure),
			total, n[clustermap.StateUp], n[clustermap.StateDown], n[clustermap.StateFailed], other)
	}
	tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
