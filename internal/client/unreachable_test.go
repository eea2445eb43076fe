package client_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"poolfs/internal/chunkstore"
	"poolfs/internal/chunkstore/drivetest"
	"poolfs/internal/client"
	"poolfs/internal/clustermap"
	"poolfs/internal/erasure"
	"poolfs/internal/meta"
	"poolfs/internal/placement"
	"poolfs/internal/rpc"
)

// TestWriteAroundDriveThisClientCannotReach: a drive stops answering this
// client's fragment writes while the map keeps it up (a one-way partition
// between this client and its server; the management service still
// reaches it). The write completes without error in bounded time, on
// other drives, the client reports the drive, and the map is unchanged.
func TestWriteAroundDriveThisClientCannotReach(t *testing.T) {
	other := start(t)
	h := &hangDrives{inner: drivetest.UpOnly(other.Drives), started: make(chan placement.DriveID, 1)}
	var mu sync.Mutex
	var reported []placement.DriveID
	c := client.New(other.Meta, other.Maps, h, client.Options{
		MapMaxAge:        20 * time.Millisecond,
		UnreachableAfter: 300 * time.Millisecond,
		OnUnreachable: func(id placement.DriveID) {
			mu.Lock()
			reported = append(reported, id)
			mu.Unlock()
		},
	})
	writeAroundHung(t, c, other, h, true, 15*time.Second, "a drive that never answers this client, though other drives are up")
	ctx := context.Background()
	mu.Lock()
	if !slices.Contains(reported, h.hung) {
		t.Errorf("drives reported unreachable %v, want %v among them", reported, h.hung)
	}
	mu.Unlock()
	m, err := other.Maps.Map(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := m.Drive(h.hung); err != nil || d.State != clustermap.StateUp {
		t.Errorf("drive %v in the map: %v, %v; the client must not change the map on its own", h.hung, d, err)
	}
}

// refusingDrives makes every fragment write to drive bad fail as
// unreachable (a dial that timed out), while the map keeps it up.
type refusingDrives struct {
	inner client.Drives
	bad   placement.DriveID
}

func (r refusingDrives) Drive(m *clustermap.Map, id placement.DriveID) (chunkstore.Drive, error) {
	d, err := r.inner.Drive(m, id)
	if err != nil || id != r.bad {
		return d, err
	}
	return refusingDrive{d}, nil
}

type refusingDrive struct{ chunkstore.Drive }

func (refusingDrive) WriteFragment(context.Context, erasure.FragmentKey, []byte) error {
	return fmt.Errorf("dial: i/o timeout: %w", rpc.ErrUnavailable)
}

// TestWriteAroundDriveThisClientCannotDial: writes to a drive fail as
// unreachable from this client while the map keeps it up (the management
// service reaches its server): the stripe is placed again around it and
// the write succeeds, where the map's own placement would name it again.
func TestWriteAroundDriveThisClientCannotDial(t *testing.T) {
	other := start(t)
	const bad = placement.DriveID(3)
	c := client.New(other.Meta, other.Maps, refusingDrives{inner: drivetest.UpOnly(other.Drives), bad: bad}, client.Options{})
	ctx := context.Background()
	data := randomPiece(6*4*testUnit + 1000) // seven stripes: some placed on the drive
	a, err := c.Meta().Create(ctx, meta.RootIno, "f", meta.TypeFile, 0o644, 0, 0, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	f, err := c.OpenAttr(a, "f")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(ctx, data, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Flush(ctx); err != nil {
		t.Fatalf("write with a drive this client cannot dial: %v", err)
	}
	if got, err := readAll(other.Client, a.Ino); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back: %d bytes, %v", len(got), err)
	}
	recs, err := other.Meta.Stripes(ctx, a.Ino, 0, 6)
	if err != nil || len(recs) != 7 {
		t.Fatalf("stripes %v, %v", recs, err)
	}
	for _, r := range recs {
		if slices.Contains(r.Drives, uint32(bad)) {
			t.Errorf("stripe %d names drive %v, which this client cannot reach", r.Stripe, bad)
		}
	}
}

// hangLater makes drive hung, once armed, answer no fragment write and
// no sync (its server is cut off from this client).
type hangLater struct {
	inner client.Drives
	mu    sync.Mutex
	armed bool
	hung  placement.DriveID
}

func (h *hangLater) Drive(m *clustermap.Map, id placement.DriveID) (chunkstore.Drive, error) {
	d, err := h.inner.Drive(m, id)
	if err != nil {
		return nil, err
	}
	return hangLaterDrive{Drive: d, id: id, h: h}, nil
}

type hangLaterDrive struct {
	chunkstore.Drive
	id placement.DriveID
	h  *hangLater
}

func (d hangLaterDrive) hangs() bool {
	d.h.mu.Lock()
	defer d.h.mu.Unlock()
	return d.h.armed && d.h.hung == d.id
}

func (d hangLaterDrive) WriteFragment(ctx context.Context, key erasure.FragmentKey, frag []byte) error {
	if d.hangs() {
		<-ctx.Done()
		return ctx.Err()
	}
	return d.Drive.WriteFragment(ctx, key, frag)
}

func (d hangLaterDrive) Sync(ctx context.Context) error {
	if d.hangs() {
		<-ctx.Done()
		return ctx.Err()
	}
	return d.Drive.Sync(ctx)
}

// TestSyncSkipsDriveThisClientCannotReach: fragments written to a drive
// before it stopped answering this client (the map keeps it up) wait for
// a sync; once a write found the drive unreachable, fsync does not wait
// for it (the stripes' other fragments are made durable), as for a drive
// the map says is down.
func TestSyncSkipsDriveThisClientCannotReach(t *testing.T) {
	other := start(t)
	h := &hangLater{inner: drivetest.UpOnly(other.Drives)}
	c := client.New(other.Meta, other.Maps, h, client.Options{UnreachableAfter: 300 * time.Millisecond, SyncDelay: -1})
	ctx := context.Background()
	write := func(name string, data []byte) (*client.File, meta.Ino) {
		t.Helper()
		a, err := c.Meta().Create(ctx, meta.RootIno, name, meta.TypeFile, 0o644, 0, 0, 0, "")
		if err != nil {
			t.Fatal(err)
		}
		f, err := c.OpenAttr(a, name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		if _, err := f.WriteAt(ctx, data, 0); err != nil {
			t.Fatal(err)
		}
		if err := f.Flush(ctx); err != nil {
			t.Fatalf("write %s: %v", name, err)
		}
		return f, a.Ino
	}
	first := randomPiece(4*testUnit + 1000)
	f, ino := write("first", first) // not synced
	recs, err := other.Meta.Stripes(ctx, ino, 0, 0)
	if err != nil || len(recs) != 1 {
		t.Fatalf("stripes %v, %v", recs, err)
	}
	h.mu.Lock()
	h.armed, h.hung = true, placement.DriveID(recs[0].Drives[0])
	h.mu.Unlock()
	second := randomPiece(6*4*testUnit + 1000) // seven stripes: some placed on the drive
	write("second", second)
	done := make(chan error, 1)
	go func() { done <- f.Sync(ctx) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("fsync: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("fsync still waits for a drive this client found unreachable")
	}
	if got, err := readAll(other.Client, ino); err != nil || !bytes.Equal(got, first) {
		t.Fatalf("read back: %d bytes, %v", len(got), err)
	}
}
