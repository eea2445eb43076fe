package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// RPC counts the calls an RPC server serves, by method ("meta.Lookup",
// "storage.Write", ...): the metadata operations of a metadata server are
// its meta.* methods.
type RPC struct {
	calls *prometheus.CounterVec
	dur   *prometheus.HistogramVec
}

// NewRPC returns the RPC instruments, registered in reg.
func NewRPC(reg prometheus.Registerer) *RPC {
	r := &RPC{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "poolfs_rpc_requests_total",
			Help: "RPC calls served, by method and result (ok or error)."}, []string{"method", "result"}),
		dur: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "poolfs_rpc_request_duration_seconds",
			Help: "Time the server's handler took for a call, by method.", Buckets: latencyBuckets}, []string{"method"}),
	}
	reg.MustRegister(r.calls, r.dur)
	return r
}

// Observe counts one call (an rpc.ServerOptions.Observe).
func (r *RPC) Observe(method string, d time.Duration, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	r.calls.WithLabelValues(method, result).Inc()
	r.dur.WithLabelValues(method).Observe(d.Seconds())
}
