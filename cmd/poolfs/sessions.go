package main

import (
	"encoding/json"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"poolfs/internal/cluster"
	"poolfs/internal/meta"
)

func sessionsCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "sessions",
		Short: "Client sessions (mounts) with the files they hold open and their leases, and orphaned files",
		Long: `Every mount holds a client session on the metadata service, a lease it renews.
The files a mount holds open are counted in its session: when the mount ends, or is
killed and its lease runs out, they are released, and files unlinked while open
(orphans) are destroyed. Orphans listed here with no session holding them were
opened outside any session; 'poolfs gc --orphans' on a quiet cluster removes them.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withConn(cmd, func(conn *cluster.Conn) error {
				ss, err := conn.Meta.Sessions(cmd.Context())
				if err != nil {
					return err
				}
				orph, err := conn.Meta.Orphans(cmd.Context(), 0, 0)
				if err != nil {
					return err
				}
				if asJSON {
					return json.NewEncoder(os.Stdout).Encode(struct {
						Sessions []meta.Session `json:"sessions"`
						Orphans  []meta.Ino     `json:"orphans"`
					}{ss, orph})
				}
				tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "session\thost\tmount\tpid\topen files\tlease left\tage\t")
				now := time.Now()
				for _, s := range ss {
					left := time.Unix(0, s.Expires).Sub(now).Round(100 * time.Millisecond)
					lease := left.String()
					if s.Closing || left < 0 {
						lease = "expired"
					}
					fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%d\t%s\t%s\t\n", s.ID, s.Host, s.Mount, s.PID, s.Opens,
						lease, now.Sub(time.Unix(0, s.Created)).Round(time.Second))
				}
				if err := tw.Flush(); err != nil {
					return err
				}
				fmt.Printf("orphans (unlinked, still open): %d\n", len(orph))
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
