package scrub

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"poolfs/internal/clustermap"
	"poolfs/internal/erasure"
	"poolfs/internal/placement"
	"poolfs/internal/recovery"
)

// TestRepairs: a pass classifies each bad fragment (missing, failing its
// CRC, inconsistent with the parity), rewrites it so that every fragment
// reads back byte for byte as written, and names the file of a stripe
// that lost more fragments than parity covers; the healthy stripe beside
// it is only read. The pass ends with one Done report carrying the same
// counts and leaves no record.
func TestRepairs(t *testing.T) {
	const ino = 7
	fragSize := int64(erasure.FragmentSize(shardSize))
	for _, tc := range []struct {
		name                            string
		damage                          func(t *testing.T, r *rig)
		missing, checksum, inconsistent int
		repaired                        int
		lost                            bool
	}{
		{name: "healthy", damage: func(*testing.T, *rig) {}},
		{name: "missing", missing: 1, repaired: 1, damage: func(t *testing.T, r *rig) {
			r.drives[1].Remove(key(ino, 1))
		}},
		{name: "checksum", checksum: 1, repaired: 1, damage: func(t *testing.T, r *rig) {
			if err := r.drives[0].Corrupt(key(ino, 0), int(fragSize)-1, 3); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "inconsistent", inconsistent: 1, repaired: 1, damage: func(t *testing.T, r *rig) {
			// A fragment sealed whole, CRCs and all, over the wrong bytes.
			rec := r.scan.recs[0]
			wrong := slices.Clone(r.shards[[2]uint64{ino, 0}])
			wrong[3] = make([]byte, shardSize)
			r.write(t, ino, rec, wrong, 3)
		}},
		{name: "two missing", missing: 2, repaired: 2, damage: func(t *testing.T, r *rig) {
			r.drives[0].Remove(key(ino, 0))
			r.drives[2].Remove(key(ino, 2))
		}},
		{name: "unrecoverable", missing: 3, lost: true, damage: func(t *testing.T, r *rig) {
			for i := range 3 {
				r.drives[placementOf(i)].Remove(key(ino, i))
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			r.add(t, ino, 3, 0, 1, 2, 3)
			r.add(t, 8, 5, 2, 3, 4, 5)
			tc.damage(t, r)
			if err := r.s.Start(context.Background(), ""); err != nil {
				t.Fatal(err)
			}
			st := r.wait(t)
			bad := tc.missing + tc.checksum + tc.inconsistent
			if st.Pool != "default" || st.Stripes != 2 || st.Checked != 2 || st.Skipped != 0 ||
				st.Missing != tc.missing || st.Checksum != tc.checksum || st.Inconsistent != tc.inconsistent ||
				st.Bad != bad || st.Repaired != tc.repaired || st.LastError != "" || st.Finished == 0 {
				t.Fatalf("status %+v; want %d missing, %d checksum, %d inconsistent, %d repaired of 2 stripes",
					st, tc.missing, tc.checksum, tc.inconsistent, tc.repaired)
			}
			// Every fragment read whole is counted: the damaged stripe's
			// good ones (an inconsistent one passes its CRCs) and all 4 of
			// the healthy one.
			if want := int64(8-tc.missing-tc.checksum) * fragSize; st.Bytes != want {
				t.Errorf("%d bytes read, want %d", st.Bytes, want)
			}
			r.checkIntact(t, 8)
			if tc.lost {
				want := []recovery.LostFile{{Ino: ino, Path: "/f7", Stripes: []uint64{0}}}
				if !slices.EqualFunc(st.Unrecoverable, want, func(a, b recovery.LostFile) bool {
					return a.Ino == b.Ino && a.Path == b.Path && slices.Equal(a.Stripes, b.Stripes)
				}) {
					t.Errorf("unrecoverable %+v, want %+v", st.Unrecoverable, want)
				}
			} else {
				r.checkIntact(t, ino)
				if len(st.Unrecoverable) != 0 || len(r.events.lost) != 0 {
					t.Errorf("files reported lost: %+v", st.Unrecoverable)
				}
			}
			dones := r.events.dones()
			if len(dones) != 1 || dones[0].Checked != 2 || dones[0].Repaired != tc.repaired || dones[0].Stopped {
				t.Errorf("done reports %+v, want one of the finished pass", dones)
			}
			if rec, ok := r.runs.Get("0"); ok {
				t.Errorf("a finished pass left its record %+v", rec)
			}
		})
	}
}

// placementOf is the drive of fragment i of the stripe the tests damage
// (written on drives 0-3 in index order).
func placementOf(i int) placement.DriveID { return placement.DriveID(i) }

// TestSkips: a stripe rewritten since the scan, or with a fragment on a
// drive that is not up, is skipped and not repaired (the collector and
// the rebuild own it), and a down drive is not read.
func TestSkips(t *testing.T) {
	const ino = 7
	t.Run("rewritten", func(t *testing.T) {
		r := newRig(t)
		r.add(t, ino, 3, 0, 1, 2, 3)
		r.drives[1].Remove(key(ino, 1))
		rec := r.scan.recs[0]
		rec.Gen = 2 // committed again since the scan
		r.stripes.set(ino, 0, rec)
		if err := r.s.Start(context.Background(), ""); err != nil {
			t.Fatal(err)
		}
		st := r.wait(t)
		if st.Checked != 1 || st.Skipped != 1 || st.Bad != 0 || st.Repaired != 0 {
			t.Fatalf("status %+v; want the stripe skipped", st)
		}
		if r.drives[1].Fragment(key(ino, 1)) != nil {
			t.Fatal("the old generation's fragment was written again")
		}
	})
	t.Run("drive down", func(t *testing.T) {
		r := newRig(t)
		r.add(t, ino, 3, 0, 1, 2, 3)
		r.drives[1].Remove(key(ino, 1))
		r.maps.Update(func(m *clustermap.Map) { m.Drives[2].State = clustermap.StateDown })
		if err := r.s.Start(context.Background(), ""); err != nil {
			t.Fatal(err)
		}
		st := r.wait(t)
		if st.Checked != 1 || st.Skipped != 1 || st.Bad != 0 || st.Repaired != 0 {
			t.Fatalf("status %+v; want the stripe skipped", st)
		}
		if n := r.hold.reads(ino); n != 0 {
			t.Fatalf("%d fragments of a stripe on a down drive were read", n)
		}
		if r.drives[1].Fragment(key(ino, 1)) != nil {
			t.Fatal("a stripe on a down drive was repaired")
		}
	})
}

// TestStop: a pass stopped by Stop reports its end (stopped) and removes
// its record; a second Start while one runs fails with ErrRunning.
func TestStop(t *testing.T) {
	r := newRig(t)
	r.add(t, 7, 3, 0, 1, 2, 3)
	r.hold.hold[7] = true
	ctx := context.Background()
	if err := r.s.Start(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.runs.Get("0"); !ok {
		t.Fatal("a started pass has no record")
	}
	if err := r.s.Start(ctx, ""); !errors.Is(err, ErrRunning) {
		t.Fatalf("second start: %v, want ErrRunning", err)
	}
	if err := r.s.Start(ctx, "nosuch"); !errors.Is(err, clustermap.ErrNoPool) {
		t.Fatalf("start of an unknown pool: %v", err)
	}
	r.s.Stop()
	st := r.s.Status()
	if st.Active || !st.Stopped || st.Finished == 0 {
		t.Fatalf("after Stop: %+v", st)
	}
	if d := r.events.dones(); len(d) != 1 || !d[0].Stopped {
		t.Fatalf("done reports %+v, want one, stopped", d)
	}
	if rec, ok := r.runs.Get("0"); ok {
		t.Fatalf("a stopped pass left its record %+v", rec)
	}
}

// TestHaltAndResume: a halted pass reports no end and keeps its record at
// the first PG not checked whole; the scheduler that runs next resumes it
// there, with the same start, without reading the stripes before it
// again, and its counts cover every stripe once.
func TestHaltAndResume(t *testing.T) {
	ctx := context.Background()
	r := newRig(t)
	r.add(t, 1, 2, 0, 1, 2, 3)
	r.add(t, 2, 2, 1, 2, 3, 4)
	r.add(t, 3, 4, 2, 3, 4, 5)
	r.add(t, 4, 6, 0, 2, 4, 5)
	r.hold.hold[3], r.hold.hold[4] = true, true
	if err := r.s.Start(ctx, ""); err != nil {
		t.Fatal(err)
	}
	started := r.s.Status().Started
	for r.s.Status().Checked < 2 {
		r.s.mu.Lock()
		done := r.s.mu.done
		r.s.mu.Unlock()
		select {
		case <-done:
			t.Fatalf("the pass ended: %+v", r.s.Status())
		case <-time.After(time.Millisecond):
		}
	}
	r.s.Halt()
	if d := r.events.dones(); len(d) != 0 {
		t.Fatalf("a halted pass reported its end: %+v", d)
	}
	rec, ok := r.runs.Get("0")
	if !ok || rec.NextPG != 4 || rec.Checked != 2 || rec.Started != started || rec.Pool != "default" {
		t.Fatalf("record after the halt %+v (%v); want next PG 4, 2 checked, started %d", rec, ok, started)
	}

	next := newHoldDrives(r.drives)
	s2 := r.scheduler(next)
	s2.Resume(ctx)
	r.s = s2
	st := r.wait(t)
	if st.Started != started || st.Checked != 4 || st.Stripes != 4 || st.Bad != 0 || st.LastError != "" {
		t.Fatalf("the resumed pass: %+v; want started %d, 4 stripes checked once", st, started)
	}
	if next.reads(1)+next.reads(2) != 0 || next.reads(3) == 0 || next.reads(4) == 0 {
		t.Fatalf("reads by the next scheduler: %v; want only the stripes of PG 4 on", next.read)
	}
	if len(r.events.started) != 2 || !strings.Contains(r.events.started[1], "resumed at PG 4") {
		t.Fatalf("start reports %q", r.events.started)
	}
	if d := r.events.dones(); len(d) != 1 || d[0].Checked != 4 {
		t.Fatalf("done reports %+v, want one covering 4 stripes", d)
	}
	if rec, ok := r.runs.Get("0"); ok {
		t.Fatalf("a finished pass left its record %+v", rec)
	}
}

// TestResumeGonePool: the record of a pool that no longer exists is
// removed, and no pass starts.
func TestResumeGonePool(t *testing.T) {
	r := newRig(t)
	r.runs.Set(context.Background(), "9", Record{Pool: "gone", Started: 1, NextPG: 3}, false)
	r.s.Resume(context.Background())
	if _, ok := r.runs.Get("9"); ok || r.s.Status().Active || len(r.events.started) != 0 {
		t.Fatalf("record kept %v, status %+v", ok, r.s.Status())
	}
}

// TestProgressRecord: the record names the first PG not checked whole and
// counts only the PGs before it, whatever order the stripes finish in.
func TestProgressRecord(t *testing.T) {
	pgs := []uint32{0, 0, 1, 2, 2}
	p := &progress{results: make([]result, len(pgs)), done: make([]bool, len(pgs)), committed: Counts{Checked: 10}}
	for i, pg := range pgs {
		p.stripes = append(p.stripes, recovery.Stripe{Ino: uint64(i), PG: pg})
	}
	base := Record{Pool: "p", Started: 5}
	for _, step := range []struct {
		i               int
		r               result
		nextPG          uint32
		checked, repair int
	}{
		{i: 1, r: result{repaired: 1}, nextPG: 0, checked: 10},
		{i: 3, nextPG: 0, checked: 10},
		{i: 0, nextPG: 1, checked: 12, repair: 1},                        // PG 0 whole
		{i: 2, nextPG: 2, checked: 13, repair: 1},                        // PGs 0 and 1 whole; PG 2 half
		{i: 4, r: result{missing: 1}, nextPG: 3, checked: 15, repair: 1}, // all: next is the pool's PG count
	} {
		p.checked(step.i, step.r)
		got := p.record(base, 3)
		if got.NextPG != step.nextPG || got.Checked != step.checked || got.Repaired != step.repair || got.Pool != "p" || got.Started != 5 {
			t.Fatalf("after stripe %d: %+v; want next PG %d, %d checked, %d repaired", step.i, got, step.nextPG, step.checked, step.repair)
		}
	}
}
