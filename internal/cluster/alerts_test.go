package cluster

import (
	"context"
	"testing"
	"time"

	"poolfs/internal/alerts"
	"poolfs/internal/iostats"
)

// waitAlert polls the open alerts until one of rule and subject satisfies
// ok (or, with ok nil, until there is none), for at most 30 s.
func waitAlert(t *testing.T, c *Cluster, rule, subject string, ok func(alerts.Alert) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var found *alerts.Alert
		for _, a := range c.Mgmt.Alerts().Open() {
			if a.Rule == rule && a.Subject == subject {
				found = &a
			}
		}
		if (ok == nil && found == nil) || (ok != nil && found != nil && ok(*found)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s %s: not as wanted in 30s; open: %+v", rule, subject, c.Mgmt.Alerts().Open())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestAlertsPoolFullAndMountClock: in a running cluster, a pool filled
// past the warning threshold opens pool.full and one emptied resolves it;
// a mount whose I/O reports carry a clock a minute behind opens a
// critical clock.skew alert, back to the warning level (set at 1ns here,
// so that any reading shows) when its clock agrees again; the storage
// server's clock, read through the failure detector's probes, is compared
// too.
func TestAlertsPoolFullAndMountClock(t *testing.T) {
	cfg := alerts.DefaultConfig()
	cfg.Interval = alerts.Duration(50 * time.Millisecond)
	cfg.Thresholds.PoolFullWarning = 20
	cfg.Thresholds.ResolveAfter = 0
	cfg.Thresholds.ClockSkewWarning = alerts.Duration(time.Nanosecond)
	c, conn := startTest(t, Config{Drives: 12, Unit: 64 << 10, DriveSize: 4 << 20, Alerts: &cfg, GCInterval: 100 * time.Millisecond})
	ctx := context.Background()
	put(t, conn, "/fill", randBytes(t, 8<<20))
	waitAlert(t, c, alerts.RulePoolFull, "pool default", func(a alerts.Alert) bool { return a.Severity == alerts.Warning })
	if err := conn.Client.Remove(ctx, "/fill"); err != nil {
		t.Fatal(err)
	}
	waitAlert(t, c, alerts.RulePoolFull, "pool default", nil)

	report := func(skew time.Duration) {
		r := &iostats.Report{Host: "h1", Mount: "/mnt", Sent: time.Now().Add(skew).UnixNano()}
		if err := conn.Mgmt.ReportIO(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	report(-time.Minute)
	waitAlert(t, c, alerts.RuleClockSkew, "mount h1:/mnt", func(a alerts.Alert) bool { return a.Severity == alerts.Critical })
	report(0)
	waitAlert(t, c, alerts.RuleClockSkew, "mount h1:/mnt", func(a alerts.Alert) bool { return a.Severity == alerts.Warning })
	waitAlert(t, c, alerts.RuleClockSkew, "server s0", func(a alerts.Alert) bool { return a.Severity == alerts.Warning })
}
