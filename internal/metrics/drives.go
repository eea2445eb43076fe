package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"poolfs/internal/chunkstore"
	"poolfs/internal/erasure"
	"poolfs/internal/placement"
)

// Drives counts the I/O of the drives a storage server serves.
type Drives struct {
	readBytes, writtenBytes *prometheus.CounterVec
	ops, errs               *prometheus.CounterVec
	dur                     *prometheus.HistogramVec
}

// latencyBuckets are the bounds of the _seconds histograms: 100 µs to
// about 26 s, ×4 apart.
var latencyBuckets = prometheus.ExponentialBuckets(0.0001, 4, 10)

// NewDrives returns the drive instruments, registered in reg.
func NewDrives(reg prometheus.Registerer) *Drives {
	d := &Drives{
		readBytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "poolfs_drive_read_bytes_total",
			Help: "Fragment bytes read from the drive."}, []string{"drive"}),
		writtenBytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "poolfs_drive_written_bytes_total",
			Help: "Fragment bytes written to the drive."}, []string{"drive"}),
		ops: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "poolfs_drive_operations_total",
			Help: "Operations on the drive by kind (read, write, delete, sync, list, stat)."}, []string{"drive", "op"}),
		errs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "poolfs_drive_errors_total",
			Help: "Operations on the drive that failed, by kind (a fragment not found counts too)."}, []string{"drive", "op"}),
		dur: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "poolfs_drive_operation_duration_seconds",
			Help: "Time of the drive's reads, writes, deletes and syncs.", Buckets: latencyBuckets}, []string{"drive", "op"}),
	}
	reg.MustRegister(d.readBytes, d.writtenBytes, d.ops, d.errs, d.dur)
	return d
}

// Wrap returns drv counted as drive id (a cluster.Config.WrapDrive).
func (d *Drives) Wrap(id placement.DriveID, drv chunkstore.Drive) chunkstore.Drive {
	name := id.String()
	op := func(op string, timed bool) driveOp {
		o := driveOp{ops: d.ops.WithLabelValues(name, op), errs: d.errs.WithLabelValues(name, op)}
		if timed {
			o.dur = d.dur.WithLabelValues(name, op)
		}
		return o
	}
	return &drive{d: drv, read: op("read", true), write: op("write", true), del: op("delete", true), sync: op("sync", true),
		list: op("list", false), stat: op("stat", false),
		readBytes: d.readBytes.WithLabelValues(name), writtenBytes: d.writtenBytes.WithLabelValues(name)}
}

type driveOp struct {
	ops, errs prometheus.Counter
	dur       prometheus.Observer // nil: not timed
}

func (o driveOp) done(start time.Time, err error) {
	o.ops.Inc()
	if err != nil {
		o.errs.Inc()
	}
	if o.dur != nil {
		o.dur.Observe(time.Since(start).Seconds())
	}
}

// drive is a chunkstore.Drive that counts its calls.
type drive struct {
	d                       chunkstore.Drive
	read, write, del, sync  driveOp
	list, stat              driveOp
	readBytes, writtenBytes prometheus.Counter
}

var _ chunkstore.Drive = (*drive)(nil)

func (d *drive) WriteFragment(ctx context.Context, key erasure.FragmentKey, frag []byte) error {
	start := time.Now()
	err := d.d.WriteFragment(ctx, key, frag)
	d.write.done(start, err)
	if err == nil {
		d.writtenBytes.Add(float64(len(frag)))
	}
	return err
}

func (d *drive) ReadFragment(ctx context.Context, key erasure.FragmentKey, off, n int64, dst []byte) ([]byte, error) {
	start := time.Now()
	b, err := d.d.ReadFragment(ctx, key, off, n, dst)
	d.read.done(start, err)
	if err == nil {
		d.readBytes.Add(float64(len(b)))
	}
	return b, err
}

func (d *drive) DeleteFragment(ctx context.Context, key erasure.FragmentKey) error {
	start := time.Now()
	err := d.d.DeleteFragment(ctx, key)
	d.del.done(start, err)
	return err
}

func (d *drive) ListFragments(ctx context.Context, fn func(key erasure.FragmentKey, size int64, mtime time.Time) error) error {
	start := time.Now()
	err := d.d.ListFragments(ctx, fn)
	d.list.done(start, err)
	return err
}

func (d *drive) Stat(ctx context.Context) (chunkstore.Usage, error) {
	start := time.Now()
	u, err := d.d.Stat(ctx)
	d.stat.done(start, err)
	return u, err
}

func (d *drive) Sync(ctx context.Context) error {
	start := time.Now()
	err := d.d.Sync(ctx)
	d.sync.done(start, err)
	return err
}
