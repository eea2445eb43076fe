package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"poolfs/internal/iostats"
)

// clientBucketStep takes every 8th bucket bound of an iostats.Histogram
// (×4 apart, 4 µs to 67 s) as the bounds of the mount's latency histogram.
const clientBucketStep = 8

var (
	clientOps = prometheus.NewDesc("poolfs_client_operations_total",
		"Operations the mount served, by class (read, write, meta).", []string{"class"}, nil)
	clientRead = prometheus.NewDesc("poolfs_client_read_bytes_total",
		"Bytes the mount's reads returned.", nil, nil)
	clientWritten = prometheus.NewDesc("poolfs_client_written_bytes_total",
		"Bytes written through the mount.", nil, nil)
	clientDur = prometheus.NewDesc("poolfs_client_operation_duration_seconds",
		"Time the mount took to answer a request, by class.", []string{"class"}, nil)
)

// clientCollector reads a mount's recorder at each scrape.
type clientCollector struct{ rec *iostats.Recorder }

// ClientCollector returns the collector of a mount's operations, all jobs
// together (per-job figures are at the management service).
func ClientCollector(rec *iostats.Recorder) prometheus.Collector { return clientCollector{rec} }

func (c clientCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- clientOps
	ch <- clientRead
	ch <- clientWritten
	ch <- clientDur
}

func (c clientCollector) Collect(ch chan<- prometheus.Metric) {
	t := c.rec.Total()
	ch <- prometheus.MustNewConstMetric(clientRead, prometheus.CounterValue, float64(t[iostats.Read].Bytes))
	ch <- prometheus.MustNewConstMetric(clientWritten, prometheus.CounterValue, float64(t[iostats.Write].Bytes))
	for cl := iostats.Class(0); cl < iostats.NumClasses; cl++ {
		k := &t[cl]
		ch <- prometheus.MustNewConstMetric(clientOps, prometheus.CounterValue, float64(k.Ops), cl.String())
		ch <- HistogramMetric(clientDur, &k.Lat, cl.String())
	}
}

// HistogramMetric returns h as a Prometheus histogram with ×4 bucket
// bounds (4 µs to 67 s). The latencies' sum is not kept: _sum is
// estimated from the buckets' middles (within 12%).
func HistogramMetric(desc *prometheus.Desc, h *iostats.Histogram, labels ...string) prometheus.Metric {
	buckets := map[float64]uint64{}
	i := 0
	var sum float64
	var prev uint64
	h.Buckets(func(lo, hi time.Duration, cum uint64) {
		sum += float64(cum-prev) * ((lo + hi) / 2).Seconds()
		prev = cum
		if i > 0 && i%clientBucketStep == 0 && i < iostats.NumBuckets-1 {
			buckets[hi.Seconds()] = cum
		}
		i++
	})
	return prometheus.MustNewConstHistogram(desc, h.Count(), sum, buckets, labels...)
}

var (
	clientHeld = prometheus.NewDesc("poolfs_client_held_total",
		"Writes the mount held back, by reason: garbage (the collector's queue over the client's garbage limit), folds (a file's delta log over its budget).", []string{"reason"}, nil)
	clientHeldSec = prometheus.NewDesc("poolfs_client_held_seconds_total",
		"Time the writes the mount held back waited, by reason.", []string{"reason"}, nil)
)

// Held is how often and how long a mount held writes back for one reason.
type Held struct {
	Reason  string
	Waits   uint64
	Seconds float64
}

// clientHeldCollector reads what held a mount's writers back at each
// scrape.
type clientHeldCollector struct{ read func() []Held }

// ClientHeldCollector returns the collector of the writes a mount held
// back; read returns the totals so far, one per reason.
func ClientHeldCollector(read func() []Held) prometheus.Collector {
	return clientHeldCollector{read}
}

func (c clientHeldCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- clientHeld
	ch <- clientHeldSec
}

func (c clientHeldCollector) Collect(ch chan<- prometheus.Metric) {
	for _, h := range c.read() {
		ch <- prometheus.MustNewConstMetric(clientHeld, prometheus.CounterValue, float64(h.Waits), h.Reason)
		ch <- prometheus.MustNewConstMetric(clientHeldSec, prometheus.CounterValue, h.Seconds, h.Reason)
	}
}
