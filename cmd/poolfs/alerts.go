package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/user"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"poolfs/internal/alerts"
	"poolfs/internal/cluster"
)

func alertsCmd(g *globals) *cobra.Command {
	var (
		asJSON bool
		all    bool
		last   int
	)
	cmd := &cobra.Command{
		Use:   "alerts",
		Short: "Open alerts (pool full, drives failed or down, rebuild stalled, data loss...); --all for the history",
		Long: `The management service evaluates the alert rules every interval (10s by default) and
keeps one alert open per rule and subject until its condition clears. Alerts are
delivered by webhook and e-mail as configured in the cluster's alerts.json
(docs/alerts.md), and kept in the metadata store with a bounded history.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withConn(cmd, func(conn *cluster.Conn) error {
				as, err := conn.Mgmt.Alerts(cmd.Context(), all, last)
				if err != nil {
					return err
				}
				if asJSON {
					return printAlertsJSON(as)
				}
				if len(as) == 0 {
					if all {
						fmt.Println("no alerts in the history")
					} else {
						fmt.Println("no open alerts")
					}
					return nil
				}
				return printAlerts(as, all)
			})
		},
	}
	f := cmd.PersistentFlags()
	f.BoolVar(&asJSON, "json", false, "machine-readable output")
	cmd.Flags().BoolVar(&all, "all", false, "the history: open and resolved alerts, newest first")
	cmd.Flags().IntVarP(&last, "last", "n", 0, "with --all, only the N newest")
	cmd.AddCommand(alertsAckCmd(g, &asJSON), alertsTestCmd(g, &asJSON))
	return cmd
}

func alertsAckCmd(g *globals, asJSON *bool) *cobra.Command {
	var who string
	cmd := &cobra.Command{
		Use:   "ack ID",
		Short: "Acknowledge an open alert (it stays open until its condition clears)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if who == "" {
				who = currentUser()
			}
			return g.withConn(cmd, func(conn *cluster.Conn) error {
				a, err := conn.Mgmt.AckAlert(cmd.Context(), args[0], who)
				if err != nil {
					return err
				}
				if *asJSON {
					return printAlertsJSON(a)
				}
				fmt.Printf("alert %s (%s %s) acknowledged by %s at %s\n", a.ID, a.Rule, a.Subject, a.AckedBy,
					a.AckedAt.Local().Format(time.DateTime))
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&who, "user", "", "who acknowledges (default: the user running the command)")
	return cmd
}

func alertsTestCmd(g *globals, asJSON *bool) *cobra.Command {
	return &cobra.Command{
		Use:   "test-delivery",
		Short: "Send a test notification on every configured channel (webhook, e-mail) and show each result",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withConn(cmd, func(conn *cluster.Conn) error {
				res, err := conn.Mgmt.TestAlertDelivery(cmd.Context())
				if err != nil {
					return err
				}
				failed := 0
				for _, r := range res {
					if r.Error != "" {
						failed++
					}
				}
				if *asJSON {
					if err := printAlertsJSON(res); err != nil {
						return err
					}
				} else {
					for _, r := range res {
						if r.Error == "" {
							fmt.Printf("%s: delivered\n", r.Channel)
						} else {
							fmt.Printf("%s: FAILED: %s\n", r.Channel, r.Error)
						}
					}
				}
				if failed > 0 {
					return fmt.Errorf("%d of %d channels failed", failed, len(res))
				}
				return nil
			})
		},
	}
}

func printAlertsJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func printAlerts(as []alerts.Alert, all bool) error {
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	head := "id\tseverity\trule\tsubject\tsince\t"
	if all {
		head += "resolved\t"
	}
	fmt.Fprintln(tw, head+"acknowledged\tdelivery\tmessage")
	for _, a := range as {
		row := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t", a.ID, strings.ToUpper(string(a.Severity)), a.Rule, a.Subject,
			a.Started.Local().Format(time.DateTime))
		if all {
			res := "open"
			if !a.Open() {
				res = a.Resolved.Local().Format(time.DateTime)
			}
			row += res + "\t"
		}
		ack := "-"
		if a.AckedBy != "" {
			ack = a.AckedBy + " " + a.AckedAt.Local().Format(time.DateTime)
		}
		fmt.Fprintf(tw, "%s%s\t%s\t%s\n", row, ack, deliverySummary(a), a.Message)
	}
	return tw.Flush()
}

// deliverySummary is the fate of each channel's last notification of a:
// "webhook sent, email FAILED" ("-" with no channel).
func deliverySummary(a alerts.Alert) string {
	var chans []string
	last := map[string]alerts.Delivery{}
	for _, d := range a.Deliveries {
		if _, ok := last[d.Channel]; !ok {
			chans = append(chans, d.Channel)
		}
		last[d.Channel] = d
	}
	var out []string
	for _, ch := range chans {
		d := last[ch]
		state := "retrying"
		switch {
		case !d.Sent.IsZero():
			state = "sent"
		case d.GaveUp:
			state = "FAILED"
		case d.Attempts == 0:
			state = "pending"
		}
		out = append(out, ch+" "+state)
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, ", ")
}

// currentUser names the user running the command, for acknowledgments.
func currentUser() string {
	name := os.Getenv("USER")
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	if name == "" {
		name = fmt.Sprintf("uid %d", os.Getuid())
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		name += "@" + h
	}
	return name
}
