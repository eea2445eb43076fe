package metrics

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"

	"poolfs/internal/chunkstore"
	"poolfs/internal/erasure"
	"poolfs/internal/iostats"
	"poolfs/internal/placement"
)

// gather returns the metrics of reg by name.
func gather(t *testing.T, reg prometheus.Gatherer) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

// value returns the counter or gauge value of the series of name with the
// label values vals (in the order of the labels' names), -1 if none.
func value(t *testing.T, reg prometheus.Gatherer, name string, vals ...string) float64 {
	t.Helper()
	mf := gather(t, reg)[name]
	for _, m := range mf.GetMetric() {
		ok := len(m.GetLabel()) == len(vals)
		for i, l := range m.GetLabel() {
			ok = ok && l.GetValue() == vals[i]
		}
		if !ok {
			continue
		}
		if c := m.GetCounter(); c != nil {
			return c.GetValue()
		}
		return m.GetGauge().GetValue()
	}
	return -1
}

// TestDriveCountsBytesAndErrors: a wrapped drive counts the bytes it
// wrote and read, its operations and its failures, per drive.
func TestDriveCountsBytesAndErrors(t *testing.T) {
	reg := prometheus.NewRegistry()
	d := NewDrives(reg)
	drv := d.Wrap(placement.DriveID(3), chunkstore.NewMemDrive("d03", 1<<30))
	ctx := context.Background()
	key := erasure.FragmentKey{Ino: 7, Stripe: 1, Gen: 1, Index: 2}
	frag := make([]byte, 3*4096)
	if err := drv.WriteFragment(ctx, key, frag); err != nil {
		t.Fatal(err)
	}
	got, err := drv.ReadFragment(ctx, key, 0, 4096, nil)
	if err != nil || len(got) != 4096 {
		t.Fatalf("read %d bytes: %v", len(got), err)
	}
	if _, err := drv.ReadFragment(ctx, erasure.FragmentKey{Ino: 8}, 0, 4096, nil); err == nil {
		t.Fatal("read of a missing fragment succeeded")
	}
	name := placement.DriveID(3).String()
	for _, c := range []struct {
		what string
		got  float64
		want float64
	}{
		{"written bytes", value(t, reg, "poolfs_drive_written_bytes_total", name), 3 * 4096},
		{"read bytes", value(t, reg, "poolfs_drive_read_bytes_total", name), 4096},
		{"writes", value(t, reg, "poolfs_drive_operations_total", name, "write"), 1},
		{"reads", value(t, reg, "poolfs_drive_operations_total", name, "read"), 2},
		{"read errors", value(t, reg, "poolfs_drive_errors_total", name, "read"), 1},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.what, c.got, c.want)
		}
	}
	if n := len(gather(t, reg)["poolfs_drive_operation_duration_seconds"].GetMetric()); n != 4 { // read, write, delete, sync
		t.Fatalf("%d duration series, want 4 (list and stat are not timed)", n)
	}
}

func TestRPCObserve(t *testing.T) {
	reg := prometheus.NewRegistry()
	r := NewRPC(reg)
	r.Observe("meta.Lookup", time.Millisecond, nil)
	r.Observe("meta.Lookup", time.Millisecond, errors.New("no"))
	if v := value(t, reg, "poolfs_rpc_requests_total", "meta.Lookup", "error"); v != 1 {
		t.Fatalf("errors %v", v)
	}
	if v := value(t, reg, "poolfs_rpc_requests_total", "meta.Lookup", "ok"); v != 1 {
		t.Fatalf("ok %v", v)
	}
}

// TestClientCollector: a mount's totals as Prometheus series, the latency
// histogram with ×4 bounds and every operation counted.
func TestClientCollector(t *testing.T) {
	rec := iostats.NewRecorder()
	rec.Record("1", iostats.Write, 4096, 3*time.Millisecond)
	rec.Record("2", iostats.Write, 100, 20*time.Microsecond)
	rec.Record("", iostats.Meta, 0, 50*time.Microsecond)
	reg := prometheus.NewRegistry()
	reg.MustRegister(ClientCollector(rec))
	if v := value(t, reg, "poolfs_client_written_bytes_total"); v != 4196 {
		t.Fatalf("written %v", v)
	}
	for class, want := range map[string]float64{"read": 0, "write": 2, "meta": 1} {
		if v := value(t, reg, "poolfs_client_operations_total", class); v != want {
			t.Fatalf("%s operations %v, want %v", class, v, want)
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "poolfs_client_operation_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			h := m.GetHistogram()
			if m.GetLabel()[0].GetValue() != "write" {
				continue
			}
			if h.GetSampleCount() != 2 || len(h.GetBucket()) != 13 {
				t.Fatalf("write histogram: %d samples, %d buckets", h.GetSampleCount(), len(h.GetBucket()))
			}
			for _, b := range h.GetBucket() {
				// 20 µs is under the 64 µs bound, 3 ms under 4.096 ms.
				want := uint64(0)
				switch {
				case b.GetUpperBound() >= 0.004096:
					want = 2
				case b.GetUpperBound() >= 0.000064:
					want = 1
				}
				if b.GetCumulativeCount() != want {
					t.Errorf("bucket ≤ %v: %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), want)
				}
			}
		}
	}
}

// TestClientHeldCollector: what held a mount's writers back, a series per
// reason, read at each scrape.
func TestClientHeldCollector(t *testing.T) {
	held := []Held{{Reason: "garbage", Waits: 3, Seconds: 1.5}, {Reason: "folds"}}
	reg := prometheus.NewRegistry()
	reg.MustRegister(ClientHeldCollector(func() []Held { return held }))
	for _, c := range []struct {
		name, reason string
		want         float64
	}{
		{"poolfs_client_held_total", "garbage", 3},
		{"poolfs_client_held_seconds_total", "garbage", 1.5},
		{"poolfs_client_held_total", "folds", 0},
		{"poolfs_client_held_seconds_total", "folds", 0},
	} {
		if v := value(t, reg, c.name, c.reason); v != c.want {
			t.Fatalf("%s{%s} = %v, want %v", c.name, c.reason, v, c.want)
		}
	}
	held[1] = Held{Reason: "folds", Waits: 7, Seconds: 0.25}
	if v := value(t, reg, "poolfs_client_held_total", "folds"); v != 7 {
		t.Fatalf("a second scrape read %v folds waits, want 7", v)
	}
}

// TestNamesFollowConventions: promlint finds nothing wrong with the names,
// units and help of the shared instruments.
func TestNamesFollowConventions(t *testing.T) {
	reg := NewRegistry("test", "v")
	NewDrives(reg).Wrap(placement.DriveID(0), chunkstore.NewMemDrive("d00", 1<<20))
	r := NewRPC(reg)
	r.Observe("m", time.Millisecond, nil)
	rec := iostats.NewRecorder()
	rec.Record("", iostats.Read, 1, time.Millisecond)
	reg.MustRegister(ClientCollector(rec))
	reg.MustRegister(ClientHeldCollector(func() []Held { return []Held{{Reason: "folds", Waits: 1, Seconds: 1}} }))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "poolfs_") {
			t.Errorf("%s: %s", p.Metric, p.Text)
		}
	}
}
