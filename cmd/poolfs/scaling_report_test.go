package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"poolfs/internal/bench"
)

// scalingKeys are the measured cases in table order.
var scalingKeys = []string{"fpp write", "fpp read", "shared write", "shared read"}

// linearRatio is BW(n) / (n × BW per server of the first point): 1 is
// linear scaling.
func linearRatio(points []scalingPoint, i int, key string) float64 {
	base := points[0].BW[key] / float64(points[0].Servers)
	if base <= 0 {
		return 0
	}
	return points[i].BW[key] / (float64(points[i].Servers) * base)
}

// writeScalingReport prints the table to w and writes it, the points
// (scaling.json) and the chart (scaling.svg) into cfg.Out.
func writeScalingReport(cfg scalingConfig, points []scalingPoint, w io.Writer) error {
	if len(points) == 0 {
		return nil
	}
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Aggregate IOR bandwidth, MiB/s (×: ratio to linear from the first point, %d servers), %s\n", points[0].Servers, stamp())
	fmt.Fprintf(&b, "%d client hosts × %d tasks, transfer 1 MiB, %s per task per server, pool %s unit %s;\n",
		cfg.Clients, cfg.TasksPer, bench.FormatSize(cfg.PerServer), cfg.Scheme, cfg.Unit)
	fmt.Fprintf(&b, "each server: link %d Mbit/s (tc tbf), %d drives %s × %g; each client link %d Mbit/s\n\n",
		cfg.ServerMbit, cfg.DrivesPer, cfg.Model, cfg.Scale, cfg.ClientMbit)
	b.WriteString("| servers |")
	for _, k := range scalingKeys {
		fmt.Fprintf(&b, " %s | × |", k)
	}
	b.WriteString("\n|---:|")
	b.WriteString(strings.Repeat("---:|---:|", len(scalingKeys)))
	b.WriteString("\n")
	for i, p := range points {
		fmt.Fprintf(&b, "| %d |", p.Servers)
		for _, k := range scalingKeys {
			fmt.Fprintf(&b, " %.1f | %.2f |", p.BW[k], linearRatio(points, i, k))
		}
		b.WriteString("\n")
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(cfg.Out, "scaling.md"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	js, err := json.MarshalIndent(struct {
		Config scalingConfig  `json:"config"`
		Points []scalingPoint `json:"points"`
	}{cfg, points}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(cfg.Out, "scaling.json"), append(js, '\n'), 0o644); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(cfg.Out, "scaling.svg"))
	if err != nil {
		return err
	}
	if err := scalingChart(points).WriteSVG(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// scalingChart draws each case's aggregate bandwidth against the server
// count, with the linear line of the file-per-task cases.
func scalingChart(points []scalingPoint) *bench.LineChart {
	c := &bench.LineChart{Title: "Aggregate IOR bandwidth against storage servers", XLabel: "storage servers", YLabel: "MiB/s"}
	for _, k := range scalingKeys {
		s := bench.Series{Name: k}
		for _, p := range points {
			s.X, s.Y = append(s.X, float64(p.Servers)), append(s.Y, p.BW[k])
		}
		c.Series = append(c.Series, s)
	}
	for _, k := range []string{"fpp write", "fpp read"} {
		s := bench.Series{Name: "linear (" + k + ")"}
		base := points[0].BW[k] / float64(points[0].Servers)
		for _, p := range points {
			s.X, s.Y = append(s.X, float64(p.Servers)), append(s.Y, base*float64(p.Servers))
		}
		c.Series = append(c.Series, s)
	}
	return c
}
