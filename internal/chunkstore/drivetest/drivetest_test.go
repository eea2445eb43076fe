package drivetest

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"poolfs/internal/chunkstore"
	"poolfs/internal/clustermap"
	"poolfs/internal/erasure"
	"poolfs/internal/placement"
)

var ctx = context.Background()

func key(i int) erasure.FragmentKey { return erasure.FragmentKey{Ino: 7, Stripe: uint64(i), Gen: 1} }

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i)*31 + seed
	}
	return b
}

// TestContract: the drive answers the chunkstore.Drive contract as a
// LocalDrive does: aligned lengths and ranges, ErrNotFound, ErrFull before
// anything is stored, copies in and out, usage.
func TestContract(t *testing.T) {
	d := NewWithCapacity("d", 3*chunkstore.Align)
	want := pattern(2*chunkstore.Align, 1)
	src := bytes.Clone(want)
	if err := d.WriteFragment(ctx, key(1), src); err != nil {
		t.Fatal(err)
	}
	src[0] ^= 0xff // the drive keeps its own copy
	if !bytes.Equal(d.Fragment(key(1)), want) {
		t.Fatal("changing a written buffer changed the stored fragment")
	}
	for name, err := range map[string]error{
		"unaligned write": d.WriteFragment(ctx, key(2), make([]byte, 100)),
		"empty write":     d.WriteFragment(ctx, key(2), nil),
	} {
		if !errors.Is(err, chunkstore.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if err := d.WriteFragment(ctx, key(2), make([]byte, 2*chunkstore.Align)); !errors.Is(err, chunkstore.ErrFull) {
		t.Fatalf("write beyond the capacity: %v, want ErrFull", err)
	}
	if d.Fragment(key(2)) != nil {
		t.Fatal("a write that failed with ErrFull stored its fragment")
	}
	got, err := d.ReadFragment(ctx, key(1), chunkstore.Align, -1, nil)
	if err != nil || !bytes.Equal(got, want[chunkstore.Align:]) {
		t.Fatalf("read of the second block: %v, equal %v", err, bytes.Equal(got, want[chunkstore.Align:]))
	}
	got[0] ^= 0xff // the caller owns what it got
	if !bytes.Equal(d.Fragment(key(1)), want) {
		t.Fatal("changing a read's result changed the stored fragment")
	}
	dst := make([]byte, 0, 2*chunkstore.Align)
	if got, _ := d.ReadFragment(ctx, key(1), 0, -1, dst); &got[0] != &dst[:1][0] {
		t.Fatal("a read with a large enough dst did not use its memory")
	}
	for _, r := range [][2]int64{{1, -1}, {0, 100}, {0, 3 * chunkstore.Align}, {3 * chunkstore.Align, -1}} {
		if _, err := d.ReadFragment(ctx, key(1), r[0], r[1], nil); !errors.Is(err, chunkstore.ErrInvalid) {
			t.Errorf("read off=%d n=%d: %v, want ErrInvalid", r[0], r[1], err)
		}
	}
	if _, err := d.ReadFragment(ctx, key(9), 0, -1, nil); !errors.Is(err, chunkstore.ErrNotFound) {
		t.Fatalf("read of a missing fragment: %v, want ErrNotFound", err)
	}
	u, err := d.Stat(ctx)
	u.HostFS = 0
	if err != nil || u != (chunkstore.Usage{Capacity: 3 * chunkstore.Align, Used: 2 * chunkstore.Align, Fragments: 1,
		Written: 2 * chunkstore.Align, HostFree: chunkstore.Align}) {
		t.Fatalf("stat: %+v, %v", u, err)
	}
	var listed []erasure.FragmentKey
	err = d.ListFragments(ctx, func(k erasure.FragmentKey, size int64, _ time.Time) error {
		listed = append(listed, k)
		if size != 2*chunkstore.Align {
			t.Errorf("listed size %d", size)
		}
		return d.DeleteFragment(ctx, k) // fn may call the drive
	})
	if err != nil || len(listed) != 1 || listed[0] != key(1) {
		t.Fatalf("list: %v, %v", listed, err)
	}
	if u, _ := d.Stat(ctx); u.Used != 0 || u.Fragments != 0 {
		t.Fatalf("stat after delete: %+v", u)
	}
	if err := d.DeleteFragment(ctx, key(1)); err != nil {
		t.Fatalf("delete of a missing fragment: %v", err)
	}
}

// TestHold: a held operation waits, whatever its context says, until
// released; other operations go on.
func TestHold(t *testing.T) {
	d := New("d")
	d.Put(key(1), pattern(chunkstore.Align, 2))
	release := d.Hold(OpRead)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	done := make(chan error, 1)
	go func() { _, err := d.ReadFragment(cctx, key(1), 0, -1, nil); done <- err }()
	if err := d.WriteFragment(ctx, key(2), make([]byte, chunkstore.Align)); err != nil {
		t.Fatalf("a write while reads are held: %v", err)
	}
	select {
	case err := <-done:
		t.Fatalf("a held read returned (%v) before its release", err)
	case <-time.After(50 * time.Millisecond):
	}
	release()
	release()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("the released read: %v", err)
	}
	if _, err := d.ReadFragment(ctx, key(1), 0, -1, nil); err != nil {
		t.Fatalf("a read after the release: %v", err)
	}
}

// TestFaultsAndCounters: FailWrites, the embedded FaultyDrive's faults,
// damage at rest, and the counters.
func TestFaultsAndCounters(t *testing.T) {
	d := New("d")
	frag := pattern(2*chunkstore.Align, 3)
	d.FailWrites(chunkstore.ErrFailed)
	if err := d.WriteFragment(ctx, key(1), frag); !errors.Is(err, chunkstore.ErrFailed) || d.Fragment(key(1)) != nil {
		t.Fatalf("a failed write: %v, stored %v", err, d.Fragment(key(1)) != nil)
	}
	d.FailWrites(nil)
	if err := d.WriteFragment(ctx, key(1), frag); err != nil {
		t.Fatal(err)
	}
	d.Offline()
	if _, err := d.ReadFragment(ctx, key(1), 0, -1, nil); !errors.Is(err, chunkstore.ErrOffline) {
		t.Fatalf("read of an offline drive: %v", err)
	}
	d.Online()
	if err := d.Corrupt(key(1), 5, 3); err != nil {
		t.Fatal(err)
	}
	got, err := d.ReadFragment(ctx, key(1), 0, -1, nil)
	if err != nil || got[5] != frag[5]^8 || !bytes.Equal(got[6:], frag[6:]) {
		t.Fatalf("read of a fragment damaged at rest: %v", err)
	}
	if d.Writes() != 2 || d.Reads() != 2 || d.BytesWritten() != int64(len(frag)) || d.BytesRead() != int64(len(frag)) {
		t.Fatalf("counters: %d writes, %d reads, %d bytes written, %d read", d.Writes(), d.Reads(), d.BytesWritten(), d.BytesRead())
	}
	if !d.Remove(key(1)) || d.Remove(key(1)) || len(d.Keys()) != 0 {
		t.Fatal("remove")
	}
}

// TestUpOnlyRefusesWhatTheMapSaysIsNotUp: a set hands out every drive it
// has; seen UpOnly, it refuses, with ErrOffline, counted, the ones the map
// says are not up.
func TestUpOnlyRefusesWhatTheMapSaysIsNotUp(t *testing.T) {
	ds := NewDrives(4)
	maps := NewMaps(Map(4, 2, 1, 4096, 1<<30))
	m := maps.Update(func(m *clustermap.Map) { m.Drives[2].State = clustermap.StateDown })
	if m.Epoch != 2 {
		t.Fatalf("epoch %d after an update, want 2", m.Epoch)
	}
	if d, err := ds.Drive(m, 2); err != nil || d != ds[2] {
		t.Fatalf("a down drive from the set: %v", err)
	}
	up := UpOnly(ds)
	if d, err := up.Drive(m, 1); err != nil || d != ds[1] {
		t.Fatalf("up drive: %v", err)
	}
	if _, err := up.Drive(m, 2); !errors.Is(err, chunkstore.ErrOffline) || ds[2].Refused() != 1 {
		t.Fatalf("down drive: %v, refused %d", err, ds[2].Refused())
	}
	if d, err := up.Drive(nil, 2); err != nil || d != ds[2] {
		t.Fatalf("without a map: %v", err)
	}
	for _, r := range []interface {
		Drive(*clustermap.Map, placement.DriveID) (chunkstore.Drive, error)
	}{ds, up} {
		if _, err := r.Drive(m, 9); !errors.Is(err, clustermap.ErrNoDrive) {
			t.Fatalf("an unknown drive: %v, want ErrNoDrive", err)
		}
	}
}
