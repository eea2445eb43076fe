package cluster

import (
	"context"
	"fmt"
	"os"
	"time"

	"poolfs/internal/alerts"
)

// startAlerts configures the management service's alert engine from
// Config.Alerts or Dir/alerts.json (alerts.LoadConfig: 0600, defaults if
// missing), with its saved alerts, and runs the rules every interval and
// the deliveries until ctx ends.
func (c *Cluster) startAlerts(ctx, run context.Context, name string) error {
	var cfg alerts.Config
	if c.Config.Alerts != nil {
		cfg = *c.Config.Alerts
		if err := cfg.Validate(); err != nil {
			return fmt.Errorf("cluster: alerts: %w", err)
		}
	} else {
		var err error
		if cfg, err = alerts.LoadConfig(c.Config.Dir); err != nil {
			return fmt.Errorf("cluster: %w", err)
		}
	}
	notifiers, err := cfg.Notifiers(c.Config.Dir, os.Getenv)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	err = c.Mgmt.ConfigureAlerts(ctx, alerts.Options{Thresholds: &cfg.Thresholds, MaxHistory: cfg.MaxHistory,
		Delivery: cfg.Delivery, Notifiers: notifiers, Cluster: name, Logger: c.log})
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	var chans []string
	for _, n := range notifiers {
		chans = append(chans, n.Channel())
	}
	c.log.Info("alerts", "interval", time.Duration(cfg.Interval), "channels", chans)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.Mgmt.RunAlerts(run, time.Duration(cfg.Interval))
	}()
	return nil
}
