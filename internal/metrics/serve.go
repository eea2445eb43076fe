package metrics

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// NewRegistry returns a registry with the Go runtime's and the process's
// collectors, poolfs_build_info (version) and poolfs_time_seconds (this
// machine's clock, to compare with Prometheus's for skew), with the
// service label set to service on every series.
func NewRegistry(service, version string) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	info := prometheus.NewGauge(prometheus.GaugeOpts{Name: "poolfs_build_info",
		Help:        "Always 1; the labels name the poolfs version and the service (up, meta, mount).",
		ConstLabels: prometheus.Labels{"version": version, "service": service}})
	info.Set(1)
	clock := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "poolfs_time_seconds",
		Help: "The service's clock at the scrape (Unix seconds); compare with timestamp() for clock skew."},
		func() float64 { return float64(time.Now().UnixNano()) / 1e9 })
	reg.MustRegister(info, clock)
	return reg
}

// Server serves /metrics over HTTP.
type Server struct {
	ln  net.Listener
	srv *http.Server
}

// Serve starts serving reg's metrics at http://addr/metrics (port 0 picks
// one: see Addr) until Close.
func Serve(addr string, reg *prometheus.Registry, log *slog.Logger) (*Server, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: slogPrinter{log}, Registry: reg}))
	s := &Server{ln: ln, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics: server stopped", "err", err)
		}
	}()
	return s, nil
}

// Addr is the address served.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops serving.
func (s *Server) Close() error { return s.srv.Close() }

// slogPrinter logs promhttp's errors.
type slogPrinter struct{ log *slog.Logger }

func (p slogPrinter) Println(v ...any) { p.log.Warn("metrics: " + fmt.Sprintln(v...)) }
