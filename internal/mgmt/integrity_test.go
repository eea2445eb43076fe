package mgmt

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"poolfs/internal/chunkstore/drivetest"
	"poolfs/internal/clustermap"
	"poolfs/internal/erasure"
	"poolfs/internal/meta"
	"poolfs/internal/meta/sqlite"
	"poolfs/internal/placement"
)

// checkedEngine is a real SQLite engine whose integrity check can be made
// to fail.
type checkedEngine struct {
	*sqlite.Engine
	corrupt atomic.Bool
}

func (e *checkedEngine) CheckIntegrity(ctx context.Context, full bool) error {
	if e.corrupt.Load() {
		return fmt.Errorf("%w: page 7: out of range (injected)", meta.ErrStoreCorrupt)
	}
	return e.Engine.CheckIntegrity(ctx, full)
}

var _ meta.Checker = (*checkedEngine)(nil)

// TestGCDeletesNothingOnACorruptStore: the orphan scan deletes an orphan
// when the store is sound (control); once the integrity check fails,
// gc --orphans refuses, the queue drain stops too, the orphan stays on the
// drive and the event meta.corrupt is raised; a service that leads next
// over the same store deletes nothing either.
func TestGCDeletesNothingOnACorruptStore(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	se, err := sqlite.Open(filepath.Join(dir, "meta.db"))
	if err != nil {
		t.Fatal(err)
	}
	eng := &checkedEngine{Engine: se}
	t.Cleanup(func() { eng.Close() })
	st := meta.New(eng, meta.Options{})
	if err := st.Init(ctx, meta.Layout{K: 2, M: 1, Unit: 1 << 16}); err != nil {
		t.Fatal(err)
	}
	drives := drivetest.NewDrives(4)
	var ids []placement.DriveID
	var mds []clustermap.Drive
	for i := 0; i < 4; i++ {
		id := placement.DriveID(i)
		ids = append(ids, id)
		mds = append(mds, clustermap.Drive{ID: id, Server: "s0", State: clustermap.StateUp, Capacity: 1 << 30})
	}
	s := New(st, drives, nil, nil)
	_, err = s.Update(ctx, func(m *clustermap.Map) error {
		m.Name = "t"
		m.Servers = []clustermap.Server{{ID: "s0", Addr: "x"}}
		m.Drives = mds
		m.Pools = []clustermap.Pool{{ID: 0, Name: "p", K: 2, M: 1, Unit: 1 << 16, Drives: ids,
			PGs: placement.DefaultPGs(4, 3), Layout: placement.Declustered}}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	orphan := func(ino uint64) erasure.FragmentKey {
		key := erasure.FragmentKey{Ino: ino, Stripe: 0, Gen: 1}
		buf := make([]byte, erasure.FragmentSize(4096))
		erasure.SealFragment(buf, erasure.Header{Key: key, K: 2, M: 1, StripeLen: 4096, ShardSize: 4096})
		if err := drives[0].WriteFragment(ctx, key, buf); err != nil {
			t.Fatal(err)
		}
		return key
	}
	has := func(key erasure.FragmentKey) bool {
		_, err := drives[0].ReadFragment(ctx, key, 0, -1, nil)
		return err == nil
	}
	k1 := orphan(100)
	time.Sleep(10 * time.Millisecond)
	rep, err := s.GC(ctx, GCArgs{Orphans: true})
	if err != nil || rep.Orphans != 1 || has(k1) {
		t.Fatalf("sound store: gc --orphans = %+v, %v; orphan still there: %v", rep, err, has(k1))
	}

	k2 := orphan(101)
	time.Sleep(10 * time.Millisecond)
	eng.corrupt.Store(true)
	_, err = s.GC(ctx, GCArgs{Orphans: true})
	if !errors.Is(err, meta.ErrStoreCorrupt) {
		t.Fatalf("gc --orphans on a corrupt store: %v, want ErrStoreCorrupt", err)
	}
	if !has(k2) {
		t.Fatal("gc --orphans on a corrupt store deleted a fragment")
	}
	eng.corrupt.Store(false) // even if a later check passes, deletion stays stopped
	if _, err := s.GC(ctx, GCArgs{}); !errors.Is(err, ErrDeletionStopped) {
		t.Fatalf("gc after a failed check: %v, want ErrDeletionStopped", err)
	}
	if _, err := s.GC(ctx, GCArgs{Orphans: true}); !errors.Is(err, ErrDeletionStopped) || !has(k2) {
		t.Fatalf("gc --orphans after a failed check: %v (fragment kept: %v)", err, has(k2))
	}
	evs, err := st.Events(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ev := range evs {
		if ev.Kind == EventMetaCorrupt {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d %s events, want 1: %+v", n, EventMetaCorrupt, evs)
	}
	// A service that takes over from this one does not delete either.
	next := New(st, drives, nil, nil)
	if _, err := next.Lead(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := next.GC(ctx, GCArgs{Orphans: true}); !errors.Is(err, ErrDeletionStopped) || !has(k2) {
		t.Fatalf("gc --orphans by the next leader: %v (fragment kept: %v)", err, has(k2))
	}
}
