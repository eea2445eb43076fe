// Package metrics exposes poolfs services to Prometheus (client_golang):
// the HTTP endpoint (Serve), and the instruments every service shares:
// drive I/O (Drives, a chunkstore.Drive wrapper), RPC calls served
// (RPC, an rpc.ServerOptions.Observe hook), a mount's operations
// (ClientCollector over its iostats.Recorder), the clock (for skew) and
// the build. The management service's view of the cluster (pools, drives,
// rebuild, scrub, jobs) is collected by mgmt.(*Service).Collector.
//
// Names follow the Prometheus conventions: the poolfs_ prefix, base units
// (bytes, seconds), _total for counters, _seconds histograms. Label values
// are bounded: drives, servers, pools, RPC methods and operation classes
// are few; jobs are limited to the busiest mgmt.DefaultTopJobs. Every
// metric is documented in docs/metrics.md.
package metrics
