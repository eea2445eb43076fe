package mgmt

import (
	"context"
	"sync"
	"testing"

	"poolfs/internal/chunkstore"
	"poolfs/internal/chunkstore/drivetest"
	"poolfs/internal/client"
	"poolfs/internal/clustermap"
	"poolfs/internal/erasure"
	"poolfs/internal/meta"
	"poolfs/internal/placement"
)

// orderDrives logs the Syncs and DeleteFragments of the drives in order.
type orderDrives struct {
	inner client.Drives
	mu    sync.Mutex
	log   []string
}

func (o *orderDrives) Drive(m *clustermap.Map, id placement.DriveID) (chunkstore.Drive, error) {
	d, err := o.inner.Drive(m, id)
	if err != nil {
		return nil, err
	}
	return &orderDrive{Drive: d, id: id, o: o}, nil
}

func (o *orderDrives) add(s string) {
	o.mu.Lock()
	o.log = append(o.log, s)
	o.mu.Unlock()
}

type orderDrive struct {
	chunkstore.Drive
	id placement.DriveID
	o  *orderDrives
}

func (d *orderDrive) Sync(ctx context.Context) error {
	d.o.add("sync " + d.id.String())
	return d.Drive.Sync(ctx)
}

func (d *orderDrive) DeleteFragment(ctx context.Context, key erasure.FragmentKey) error {
	d.o.add("delete")
	return d.Drive.DeleteFragment(ctx, key)
}

// TestGCSyncsDrivesBeforeDeleting: the generation a commit replaced is
// deleted only after every drive that is up was synced (clients write the
// replacing generation deferred), so a power loss cannot take the new
// generation after the old one is gone.
func TestGCSyncsDrivesBeforeDeleting(t *testing.T) {
	ctx := context.Background()
	st := newTestStore(t)
	if err := st.Init(ctx, meta.Layout{K: 2, M: 1, Unit: 1 << 16}); err != nil {
		t.Fatal(err)
	}
	drives := &orderDrives{inner: drivetest.NewDrives(4)}
	var ids []placement.DriveID
	var mds []clustermap.Drive
	for i := range 4 {
		id := placement.DriveID(i)
		ids = append(ids, id)
		mds = append(mds, clustermap.Drive{ID: id, Server: "s0", State: clustermap.StateUp, Capacity: 1 << 30})
	}
	s := New(st, drives, nil, nil)
	if _, err := s.Update(ctx, func(m *clustermap.Map) error {
		m.Name = "t"
		m.Servers = []clustermap.Server{{ID: "s0", Addr: "x"}}
		m.Drives = mds
		m.Pools = []clustermap.Pool{{ID: 0, Name: "p", K: 2, M: 1, Unit: 1 << 16, Drives: ids,
			PGs: placement.DefaultPGs(4, 3), Layout: placement.Declustered}}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	a, err := st.Create(ctx, meta.RootIno, "f", meta.TypeFile, 0o644, 0, 0, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	rec := meta.StripeRec{Stripe: 0, Gen: 1, PG: 0, Len: 4096, ShardSize: 4096, Drives: []uint32{0, 1, 2}, K: 2}
	if _, err := st.CommitStripes(ctx, a.Ino, []meta.StripeCommit{{Rec: rec}}, 4096, 1); err != nil {
		t.Fatal(err)
	}
	rec.Gen = 2
	if _, err := st.CommitStripes(ctx, a.Ino, []meta.StripeCommit{{Rec: rec, OldGen: 1}}, 4096, 2); err != nil {
		t.Fatal(err)
	}
	rep, err := s.GC(ctx, GCArgs{})
	if err != nil || rep.Queued != 1 {
		t.Fatalf("gc: %+v, %v; want the replaced generation collected", rep, err)
	}
	synced := map[string]bool{}
	deleted := false
	for _, e := range drives.log {
		if e == "delete" {
			deleted = true
			if len(synced) != len(ids) {
				t.Fatalf("a fragment was deleted after syncing %d of %d drives: %v", len(synced), len(ids), drives.log)
			}
			continue
		}
		synced[e] = true
	}
	if !deleted {
		t.Fatalf("nothing deleted: %v", drives.log)
	}
}
