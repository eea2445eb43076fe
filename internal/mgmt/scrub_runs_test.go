package mgmt

import (
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
	"poolfs/internal/mgmt/scrub"
	"poolfs/internal/placement"
)

type stripeKey struct{ ino, stripe uint64 }

// scrubDrives records the stripes whose fragments are read, and makes
// reads of the stripes in hold wait until their context ends.
type scrubDrives struct {
	inner client.Drives
	hold  map[stripeKey]bool
	mu    sync.Mutex
	read  map[stripeKey]bool
}

func (s *scrubDrives) Drive(m *clustermap.Map, id placement.DriveID) (chunkstore.Drive, error) {
	d, err := s.inner.Drive(m, id)
	if err != nil {
		return nil, err
	}
	return scrubDrive{Drive: d, s: s}, nil
}

type scrubDrive struct {
	chunkstore.Drive
	s *scrubDrives
}

func (d scrubDrive) ReadFragment(ctx context.Context, key erasure.FragmentKey, off, n int64, dst []byte) ([]byte, error) {
	k := stripeKey{key.Ino, key.Stripe}
	d.s.mu.Lock()
	d.s.read[k] = true
	d.s.mu.Unlock()
	if d.s.hold[k] {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return d.Drive.ReadFragment(ctx, key, off, n, dst)
}

// TestScrubCarriedOverByNextLeader: a scrub pass whose coordinator ends
// (its leader lost the lease) leaves its progress in the store; the
// coordinator of the service that leads next carries the pass on from
// the first placement group not checked whole, without checking again the
// stripes before it, with the same start and counts that cover every
// stripe once; the pass ends with one scrub.done event and no record.
func TestScrubCarriedOverByNextLeader(t *testing.T) {
	ctx := context.Background()
	store := newTestStore(t)
	drives := drivetest.NewDrives(8)
	cm := drivetest.Map(8, 2, 1, 64<<10, 1<<30)
	first := &scrubDrives{inner: drivetest.UpOnly(drives), hold: map[stripeKey]bool{}, read: map[stripeKey]bool{}}
	a := New(store, first, nil, nil)
	if _, err := a.Update(ctx, func(m *clustermap.Map) error {
		m.Name, m.Drives, m.Pools = "t", cm.Drives, cm.Pools
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	p := cm.Pools[0]
	if err := store.Init(ctx, meta.Layout{Pool: p.ID, K: p.K, M: p.M, Unit: p.Unit}); err != nil {
		t.Fatal(err)
	}
	if err := store.SetPoolLimit(ctx, p.ID, 1<<40); err != nil {
		t.Fatal(err)
	}
	cl := client.New(store, a, drivetest.UpOnly(drives), client.Options{})
	pgOf := map[stripeKey]uint32{}
	for i := range 12 {
		name := fmt.Sprintf("f%d", i)
		attr, err := store.Create(ctx, meta.RootIno, name, meta.TypeFile, 0o644, 0, 0, 0, "")
		if err != nil {
			t.Fatal(err)
		}
		f, err := cl.OpenAttr(attr, name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(ctx, make([]byte, 3*2*64<<10), 0); err != nil {
			t.Fatal(err)
		}
		if err := f.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		f.Close()
		recs, err := store.Stripes(ctx, attr.Ino, 0, 2)
		if err != nil || len(recs) != 3 {
			t.Fatalf("stripes of %s: %v, %v", name, recs, err)
		}
		for _, r := range recs {
			pgOf[stripeKey{uint64(attr.Ino), r.Stripe}] = r.PG
		}
	}
	var pgs []uint32
	for _, pg := range pgOf {
		pgs = append(pgs, pg)
	}
	slices.Sort(pgs)
	cut := pgs[len(pgs)/2] // the first pass checks the PGs below cut only
	below := 0
	for k, pg := range pgOf {
		if pg >= cut {
			first.hold[k] = true
		} else {
			below++
		}
	}
	if below == 0 || below == len(pgOf) {
		t.Fatalf("PG %d does not split the stripes", cut)
	}

	if err := a.StartScrub(ctx, ""); err != nil {
		t.Fatal(err)
	}
	started := a.Scrub().Started
	rec := func() (scrub.Record, bool) {
		t.Helper()
		recs, _, err := loadBlobMap[scrub.Record](ctx, store, scrubBlob)
		if err != nil {
			t.Fatal(err)
		}
		r, ok := recs[fmt.Sprint(p.ID)]
		return r, ok
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if r, _ := rec(); r.NextPG == cut && r.Checked == below {
			break
		}
		if time.Now().After(deadline) {
			r, ok := rec()
			t.Fatalf("the first pass recorded %+v (%v); want next PG %d after %d stripes", r, ok, cut, below)
		}
	}
	a.haltScrub() // as when its leader loses the lease
	if r, ok := rec(); !ok || r.NextPG != cut || r.Checked != below || r.Started != started {
		t.Fatalf("after the first coordinator ended the record is %+v (%v); want next PG %d, %d checked, started %d", r, ok, cut, below, started)
	}

	second := &scrubDrives{inner: drivetest.UpOnly(drives), read: map[stripeKey]bool{}}
	b := New(store, second, nil, nil)
	if _, err := b.Lead(ctx, nil); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); b.RunCoordinator(cctx, time.Hour) }()
	t.Cleanup(func() { cancel(); <-done })
	var st ScrubStatus
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if st = b.Scrub(); st.Started != 0 && !st.Active {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the next leader's scrub: %+v; want the pass carried on and finished", st)
		}
	}
	if st.Started != started || st.Checked != len(pgOf) || st.Stripes != len(pgOf) || st.Bad != 0 || st.LastError != "" {
		t.Fatalf("the carried-on pass: %+v; want started %d, %d stripes checked once, none bad", st, started, len(pgOf))
	}
	for k := range second.read {
		if pgOf[k] < cut {
			t.Errorf("the next leader checked again stripe %v of PG %d, below %d", k, pgOf[k], cut)
		}
	}
	for k, pg := range pgOf {
		if pg >= cut && !second.read[k] {
			t.Errorf("the next leader did not check stripe %v of PG %d", k, pg)
		}
	}
	if r, ok := rec(); ok {
		t.Errorf("a finished pass left its record: %+v", r)
	}
	evs, err := store.Events(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ev := range evs {
		if ev.Kind == EventScrubDone {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d %s events, want 1: %+v", n, EventScrubDone, evs)
	}
}
