package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"poolfs/internal/metrics"
)

// Default --metrics addresses, on loopback next to the RPC ports of `up`
// (9401) and `meta` (9402): the management service (`up`, `mgmt`) 9403,
// `meta` 9404, `storage` 9405. A mount serves none unless asked.
const (
	defaultUpMetrics      = "127.0.0.1:9403"
	defaultMetaMetrics    = "127.0.0.1:9404"
	defaultStorageMetrics = "127.0.0.1:9405"
)

// metricsFlag is the --metrics option of a service.
type metricsFlag struct {
	addr string
	cmd  *cobra.Command
}

func (f *metricsFlag) add(cmd *cobra.Command, def string) {
	f.cmd = cmd
	help := "serve Prometheus metrics at http://ADDR/metrics (off: none)"
	if def == "" {
		help = "serve Prometheus metrics at http://ADDR/metrics (default: none)"
	}
	cmd.Flags().StringVar(&f.addr, "metrics", def, help)
}

// registry returns a registry for the service, or nil if metrics are off.
func (f *metricsFlag) registry(service string) *prometheus.Registry {
	if f.addr == "" || f.addr == "off" {
		return nil
	}
	return metrics.NewRegistry(service, strings.TrimPrefix(versionString(), "poolfs "))
}

// serve serves reg (nil: nothing). If the default address is taken (a
// second cluster on this machine), metrics are off with a warning; an
// address given on the command line that cannot be served is an error.
func (f *metricsFlag) serve(reg *prometheus.Registry) (func(), error) {
	if reg == nil {
		return func() {}, nil
	}
	srv, err := metrics.Serve(f.addr, reg, nil)
	if err != nil {
		if f.cmd.Flags().Changed("metrics") {
			return nil, fmt.Errorf("--metrics %s: %w", f.addr, err)
		}
		fmt.Fprintf(os.Stderr, "poolfs: metrics off: %v (give --metrics ADDR)\n", err)
		return func() {}, nil
	}
	fmt.Printf("metrics: http://%s/metrics\n", srv.Addr())
	return func() { srv.Close() }, nil
}
