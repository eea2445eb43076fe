package main

import (
	"context"
	"testing"

	"poolfs/internal/chunkstore"
	"poolfs/internal/erasure"
	"poolfs/internal/placement"
	"poolfs/internal/plan"
)

// TestDriveTimeCountsEveryOperation: the client drive time of `bench
// rebuild` counts syncs and deletes at one access each, as the speed model
// books them, not only fragment reads and writes.
func TestDriveTimeCountsEveryOperation(t *testing.T) {
	sm, _ := chunkstore.ModelByName("hdd-7200")
	sm = sm.Scale(0.02)
	dt := &driveTime{m: sm}
	ctx := context.Background()
	d := dt.wrap(1, chunkstore.NewMemDrive("d1", 1<<30))
	frag := make([]byte, 64<<10)
	key := erasure.FragmentKey{Ino: 1, Stripe: 2, Gen: 3, Index: 0}
	if err := d.WriteFragment(ctx, key, frag); err != nil {
		t.Fatal(err)
	}
	if _, err := d.ReadFragment(ctx, key, 0, -1, nil); err != nil {
		t.Fatal(err)
	}
	if err := d.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := d.DeleteFragment(ctx, key); err != nil {
		t.Fatal(err)
	}
	got := dt.snapshot()
	want := sm.Service(64<<10, sm.WriteBW) + sm.Service(64<<10, sm.ReadBW) + 2*sm.Service(0, 0)
	if got.Busy != want || got.Reads != 1 || got.Writes != 1 || got.Syncs != 1 || got.Deletes != 1 {
		t.Errorf("drive time %v (%+v), want %v and one of each operation", got.Busy, got, want)
	}
}

// TestBenchLoad: a bench run that recorded its clients' drive time is
// predicted with that load over the drives clients use, not with the load
// of its throughput alone.
func TestBenchLoad(t *testing.T) {
	sm, _ := chunkstore.ModelByName("hdd-7200")
	p := plan.Pool{Drives: 24, DriveBytes: 4 << 30, Speed: sm.Scale(0.02), K: 8, M: 2, Layout: placement.Declustered, Unit: 256 << 10}
	if got := benchLoad(p, 11.5, 0, 5); got != 0.5 {
		t.Errorf("declustered, 11.5 drive-s/s over 23 survivors: load %g, want 0.5", got)
	}
	if got, want := benchLoad(p, 0, 0, 5), plan.ClientLoad(p, 5); got != want {
		t.Errorf("no drive time recorded: load %g, want the throughput's %g", got, want)
	}
	p.Layout = placement.Grouped // two groups of 10 and 4 hot spares
	if got := benchLoad(p, 10, 0, 5); got != 0.5 {
		t.Errorf("grouped, 10 drive-s/s over 20 group drives: load %g, want 0.5", got)
	}
	if got := benchLoad(p, 10, 0.8, 5); got != 0.8 {
		t.Errorf("grouped, 0.8 drive-s/s on each drive the rebuild used: load %g, want 0.8", got)
	}
}

// TestClientLoadOnRebuildDrives: the client drive time a bench run
// records for the drives its rebuild used is theirs, per drive, less the
// rebuild's own I/O on them; the load on drives the rebuild did not use
// (another group of a grouped pool) does not count.
func TestClientLoadOnRebuildDrives(t *testing.T) {
	sm, _ := chunkstore.ModelByName("hdd-7200")
	sm = sm.Scale(0.02)
	dt := &driveTime{m: sm}
	ctx := context.Background()
	drives := make([]chunkstore.Drive, 4)
	for i := range drives {
		drives[i] = dt.wrap(placement.DriveID(i), chunkstore.NewMemDrive("d", 1<<30))
	}
	const fragSize = 64 << 10
	frag := make([]byte, fragSize)
	write := func(d chunkstore.Drive, n int) {
		for i := range n {
			if err := d.WriteFragment(ctx, erasure.FragmentKey{Ino: 1, Stripe: uint64(i)}, frag); err != nil {
				t.Fatal(err)
			}
		}
	}
	before := dt.snapshot()
	// The rebuild reads 3 fragments from d00 and writes 3 to d01 (as the
	// coordinator counts them); clients write 2 fragments to d00 and 10
	// to d02, which the rebuild does not use.
	write(drives[1], 3)   // the rebuild's writes
	write(drives[0], 3+2) // the drive's busy time: 5 writes, of which the rebuild's 3 reads are taken off
	write(drives[2], 10)
	ops := dt.snapshot().sub(before)
	r := &rebuildRun{RebuildSec: 2}
	reads := map[string]int64{"d00": 3 * fragSize}
	writes := map[string]int64{"d01": 3 * fragSize}
	r.clientIO(ops, sm, reads, writes, fragSize, 3)
	w, rd := sm.Service(fragSize, sm.WriteBW).Seconds(), sm.Service(fragSize, sm.ReadBW).Seconds()
	want := (5*w - 3*rd) / 2 / 2 // d00's client time (d01's is 0), per drive, per second
	if got := r.ClientRebuildDriveSec; got < want*0.999 || got > want*1.001 {
		t.Errorf("client load on the rebuild's drives %g s/s, want %g", got, want)
	}
}
