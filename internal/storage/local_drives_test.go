package storage

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

// remoteStub is the RPC side of InProcess: it records which drives were
// asked of it.
type remoteStub struct{ asked []placement.DriveID }

var errRemote = errors.New("remote drive asked for")

func (r *remoteStub) Drive(_ *clustermap.Map, id placement.DriveID) (chunkstore.Drive, error) {
	r.asked = append(r.asked, id)
	return nil, errRemote
}

// TestInProcessDrives checks that a client in the server's process uses
// the server's own drives directly (bytes round trip, sentinel errors as
// over RPC, every I/O counted as client I/O by the rebuild gate) and asks
// remote for the others.
func TestInProcessDrives(t *testing.T) {
	d, err := chunkstore.Open(t.TempDir()+"/d0", chunkstore.Options{Capacity: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	s := NewServer(map[placement.DriveID]chunkstore.Drive{0: d}, nil)
	remote := &remoteStub{}
	src := s.InProcess(remote)
	ctx := context.Background()

	local, err := src.Drive(nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !chunkstore.IsInProcess(local) {
		t.Fatal("a drive of this server does not say it is served in process")
	}
	key := erasure.FragmentKey{Ino: 7, Stripe: 3, Gen: 1, Index: 1}
	frag := erasure.AlignedBuffer(erasure.FragmentSize(8192))
	for i := range frag[erasure.HeaderSize(8192):] {
		frag[erasure.HeaderSize(8192)+i] = byte(i * 7)
	}
	erasure.SealFragment(frag, erasure.Header{Key: key, K: 1, M: 1, StripeLen: 8192, ShardSize: 8192})

	before := time.Now()
	if err := local.WriteFragment(ctx, key, frag); err != nil {
		t.Fatal(err)
	}
	s.gate.mu.Lock()
	gd := s.gate.driveLocked(0)
	busy, at := gd.client, gd.clientAt
	s.gate.mu.Unlock()
	if busy != 0 || at.Before(before) {
		t.Fatalf("gate after a write: %d client I/Os in flight, last at %v (want 0, after %v)", busy, at, before)
	}
	got, err := local.ReadFragment(ctx, key, 0, -1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, frag) {
		t.Fatalf("read back %d bytes that differ from the %d written", len(got), len(frag))
	}
	if err := local.DeleteFragment(ctx, key); err != nil {
		t.Fatal(err)
	}
	if _, err := local.ReadFragment(ctx, key, 0, -1, nil); !errors.Is(err, chunkstore.ErrNotFound) {
		t.Fatalf("read after delete: %v, want %v", err, chunkstore.ErrNotFound)
	}

	if _, err := src.Drive(nil, 5); !errors.Is(err, errRemote) {
		t.Fatalf("drive 5 (not served here): %v, want the remote's answer", err)
	}
	if len(remote.asked) != 1 || remote.asked[0] != 5 {
		t.Fatalf("remote asked for %v, want only d05", remote.asked)
	}
}
