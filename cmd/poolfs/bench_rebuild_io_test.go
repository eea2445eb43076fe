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
	if got := benchLoad(p, 11.5, 5); got != 0.5 {
		t.Errorf("declustered, 11.5 drive-s/s over 23 survivors: load %g, want 0.5", got)
	}
	if got, want := benchLoad(p, 0, 5), plan.ClientLoad(p, 5); got != want {
		t.Errorf("no drive time recorded: load %g, want the throughput's %g", got, want)
	}
	p.Layout = placement.Grouped // two groups of 10 and 4 hot spares
	if got := benchLoad(p, 10, 5); got != 0.5 {
		t.Errorf("grouped, 10 drive-s/s over 20 group drives: load %g, want 0.5", got)
	}
}
