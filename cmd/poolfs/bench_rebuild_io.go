package main

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"poolfs/internal/chunkstore"
	"poolfs/internal/erasure"
	"poolfs/internal/placement"
)

// driveTime adds up the drive time that every I/O on the emulated drives
// takes by the speed model (chunkstore.SpeedModel.Service: reads, writes,
// deletes and syncs alike, as chunkstore.Throttle books them), so that a
// bench can tell how much of the drives' time clients used.
type driveTime struct {
	m                             chunkstore.SpeedModel
	busy                          atomic.Int64 // nanoseconds
	reads, writes, syncs, deletes atomic.Int64
	mu                            sync.Mutex
	byDrive                       map[string]*atomic.Int64 // busy nanoseconds by drive name
}

// driveOps is a snapshot of a driveTime.
type driveOps struct {
	Busy                          time.Duration
	Reads, Writes, Syncs, Deletes int64
	ByDrive                       map[string]time.Duration
}

func (t *driveTime) snapshot() driveOps {
	o := driveOps{Busy: time.Duration(t.busy.Load()), Reads: t.reads.Load(), Writes: t.writes.Load(),
		Syncs: t.syncs.Load(), Deletes: t.deletes.Load(), ByDrive: map[string]time.Duration{}}
	t.mu.Lock()
	for name, b := range t.byDrive {
		o.ByDrive[name] = time.Duration(b.Load())
	}
	t.mu.Unlock()
	return o
}

func (o driveOps) sub(b driveOps) driveOps {
	d := driveOps{Busy: o.Busy - b.Busy, Reads: o.Reads - b.Reads, Writes: o.Writes - b.Writes,
		Syncs: o.Syncs - b.Syncs, Deletes: o.Deletes - b.Deletes, ByDrive: map[string]time.Duration{}}
	for name, v := range o.ByDrive {
		d.ByDrive[name] = v - b.ByDrive[name]
	}
	return d
}

// wrap is a cluster.Config.WrapDrive that counts drive id's I/O.
func (t *driveTime) wrap(id placement.DriveID, d chunkstore.Drive) chunkstore.Drive {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byDrive == nil {
		t.byDrive = map[string]*atomic.Int64{}
	}
	own := t.byDrive[id.String()]
	if own == nil {
		own = new(atomic.Int64)
		t.byDrive[id.String()] = own
	}
	return timedDrive{Drive: d, t: t, own: own}
}

type timedDrive struct {
	chunkstore.Drive
	t   *driveTime
	own *atomic.Int64 // this drive's busy nanoseconds
}

func (d timedDrive) book(n, bw int64, count *atomic.Int64) {
	svc := int64(d.t.m.Service(n, bw))
	d.t.busy.Add(svc)
	d.own.Add(svc)
	count.Add(1)
}

func (d timedDrive) WriteFragment(ctx context.Context, key erasure.FragmentKey, frag []byte) error {
	err := d.Drive.WriteFragment(ctx, key, frag)
	if err == nil {
		d.book(int64(len(frag)), d.t.m.WriteBW, &d.t.writes)
	}
	return err
}

func (d timedDrive) ReadFragment(ctx context.Context, key erasure.FragmentKey, off, n int64, dst []byte) ([]byte, error) {
	b, err := d.Drive.ReadFragment(ctx, key, off, n, dst)
	if err == nil {
		d.book(int64(len(b)), d.t.m.ReadBW, &d.t.reads)
	}
	return b, err
}

func (d timedDrive) DeleteFragment(ctx context.Context, key erasure.FragmentKey) error {
	err := d.Drive.DeleteFragment(ctx, key)
	if err == nil {
		d.book(0, 0, &d.t.deletes)
	}
	return err
}

func (d timedDrive) Sync(ctx context.Context) error {
	err := d.Drive.Sync(ctx)
	if err == nil {
		d.book(0, 0, &d.t.syncs)
	}
	return err
}

// clientIO records the drive time and operations of client I/O during the
// rebuild window: ops (every drive operation in the window) less the
// rebuild's reads and writes (bytes per drive, in fragments of fragSize),
// whose time rebuildBound spread over surviving drives as r.BoundSec;
// and the client drive time on the drives the rebuild read or wrote, per
// drive (what slows the rebuild: a grouped pool's rebuild uses one group,
// which may take more or less than the pool's mean share of the load).
func (r *rebuildRun) clientIO(ops driveOps, sm chunkstore.SpeedModel, reads, writes map[string]int64, fragSize int64, surviving int) {
	var nr, nw int64
	for _, b := range reads {
		nr += b / fragSize
	}
	for _, b := range writes {
		nw += b / fragSize
	}
	sec := max(r.RebuildSec, 1e-9)
	r.ClientDriveSec = max(0, ops.Busy.Seconds()-r.BoundSec*float64(surviving)) / sec
	r.ClientOps = map[string]float64{"read": float64(ops.Reads-nr) / sec, "write": float64(ops.Writes-nw) / sec,
		"sync": float64(ops.Syncs) / sec, "delete": float64(ops.Deletes) / sec}
	own := rebuildBusy(sm, reads, writes, fragSize)
	var client float64
	for name, b := range own {
		client += max(0, ops.ByDrive[name].Seconds()-b)
	}
	if len(own) > 0 {
		r.ClientRebuildDriveSec = client / float64(len(own)) / sec
	}
}
