package mgmt

import (
	"context"
	"testing"

	"poolfs/internal/chunkstore/drivetest"
	"poolfs/internal/clustermap"
	"poolfs/internal/erasure"
	"poolfs/internal/meta"
	"poolfs/internal/placement"
)

// admissionPool is a management service over 12 in-memory drives of 8 MiB
// in one 8+2 pool with 64 KiB units and two drives' preservation, and the
// drives' client write limits.
func admissionPool(t *testing.T) (*Service, *meta.Store, drivetest.Drives, map[placement.DriveID]int64) {
	t.Helper()
	ctx := context.Background()
	st := newTestStore(t)
	if err := st.Init(ctx, meta.Layout{K: 8, M: 2, Unit: 1 << 16}); err != nil {
		t.Fatal(err)
	}
	drives := drivetest.Drives{}
	var ids []placement.DriveID
	var mds []clustermap.Drive
	for i := range 12 {
		id := placement.DriveID(i)
		ids = append(ids, id)
		drives[id] = drivetest.NewWithCapacity(id.String(), 8<<20)
		mds = append(mds, clustermap.Drive{ID: id, Server: "s0", State: clustermap.StateUp, Capacity: 8 << 20})
	}
	s := New(st, drives, nil, nil)
	m, err := s.Update(ctx, func(m *clustermap.Map) error {
		m.Name = "t"
		m.Servers = []clustermap.Server{{ID: "s0", Addr: "x"}}
		m.Drives = mds
		m.Pools = []clustermap.Pool{{ID: 0, Name: "p", K: 8, M: 2, Unit: 1 << 16, Drives: ids, Preservation: 2,
			PGs: placement.DefaultPGs(12, 10), Layout: placement.Declustered}}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	limits, err := m.WriteLimits(0)
	if err != nil {
		t.Fatal(err)
	}
	return s, st, drives, limits
}

// fillTo puts fragments of a full 64 KiB unit on every drive until it is
// three fragments short of its write limit, each drive's keys numbered
// from base; it returns the fragments put per drive.
func fillTo(t *testing.T, drives drivetest.Drives, limits map[placement.DriveID]int64, base uint64) map[placement.DriveID]int {
	t.Helper()
	frag := erasure.FragmentSize(1 << 16)
	out := map[placement.DriveID]int{}
	for id, d := range drives {
		u, err := d.Stat(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		n := int((limits[id]-u.Used)/int64(frag)) - 3
		for i := range n {
			d.Put(erasure.FragmentKey{Ino: 1000 + uint64(id), Stripe: base + uint64(i)}, make([]byte, frag))
		}
		out[id] = n
	}
	return out
}

// roomLeft is the shard bytes the drives can still take before each is at
// its write limit.
func roomLeft(t *testing.T, drives drivetest.Drives, limits map[placement.DriveID]int64) uint64 {
	t.Helper()
	per := float64(1<<16) / float64(erasure.FragmentSize(1<<16))
	var left float64
	for id, d := range drives {
		u, err := d.Stat(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		left += float64(max(limits[id]-u.Used, 0)) * per
	}
	return uint64(left)
}

// TestPoolLimitCountsFragmentsInFlight: fragments a writer has stored but
// not yet committed fill the drives close to their limits. The pool limit
// must still let their commits through (they take no more room than they
// already do), and admit no more beyond them than the drives can take.
// (The limit was committed usage plus the drives' room, which counted the
// in-flight fragments twice and refused their commits as "pool full".)
func TestPoolLimitCountsFragmentsInFlight(t *testing.T) {
	ctx := context.Background()
	s, st, drives, limits := admissionPool(t)
	put := fillTo(t, drives, limits, 0)
	var inFlight uint64
	for _, n := range put {
		inFlight += uint64(n) << 16
	}
	s.UpdatePoolLimits(ctx)
	used, limit, err := st.PoolUsage(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if used != 0 {
		t.Fatalf("committed %d bytes, want 0", used)
	}
	if limit < inFlight {
		t.Fatalf("limit %d bytes: the commits of the %d bytes the drives already hold would be refused", limit, inFlight)
	}
	if left := roomLeft(t, drives, limits); limit > inFlight+left {
		t.Fatalf("limit %d bytes admits more than the %d in flight plus the %d the drives can take", limit, inFlight, left)
	}
}

// TestPoolLimitGarbageIsNotRoom: fragments of replaced generations that
// the collector has not deleted yet take room on the drives; they neither
// count as room nor as usage that will come (they will be deleted, not
// committed), so the limit admits no more than the drives can take.
func TestPoolLimitGarbageIsNotRoom(t *testing.T) {
	ctx := context.Background()
	s, st, drives, limits := admissionPool(t)
	a, err := st.Create(ctx, meta.RootIno, "f", meta.TypeFile, 0o644, 0, 0, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	frag := erasure.FragmentSize(1 << 16)
	full := func() bool {
		for id, d := range drives {
			u, _ := d.Stat(ctx)
			if limits[id]-u.Used < int64(6*frag) {
				return true
			}
		}
		return false
	}
	// Stripe n: generation 1 replaced by generation 2, both stored on the
	// ten drives from n mod 12.
	for n := uint64(0); !full(); n++ {
		var ds []uint32
		for i := range 10 {
			id := uint32((n + uint64(i)) % 12)
			ds = append(ds, id)
			for gen := uint64(1); gen <= 2; gen++ {
				drives[placement.DriveID(id)].Put(erasure.FragmentKey{Ino: uint64(a.Ino), Stripe: n, Gen: gen, Index: uint8(i)}, make([]byte, frag))
			}
		}
		rec := meta.StripeRec{Stripe: n, Gen: 1, PG: 0, Len: 8 << 16, ShardSize: 1 << 16, Drives: ds, K: 8}
		size := (n + 1) * 8 << 16
		if _, err := st.CommitStripes(ctx, a.Ino, []meta.StripeCommit{{Rec: rec}}, size, 1); err != nil {
			t.Fatal(err)
		}
		rec.Gen = 2
		if _, err := st.CommitStripes(ctx, a.Ino, []meta.StripeCommit{{Rec: rec, OldGen: 1}}, size, 2); err != nil {
			t.Fatal(err)
		}
	}
	s.UpdatePoolLimits(ctx)
	used, limit, err := st.PoolUsage(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if left := roomLeft(t, drives, limits); limit > used+left {
		t.Fatalf("limit %d bytes with %d committed admits more than the %d bytes the drives can take (garbage counted as usage to come?)", limit, used, left)
	}
	if limit < used {
		t.Fatalf("limit %d bytes below the %d committed", limit, used)
	}
}
