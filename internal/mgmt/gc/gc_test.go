package gc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"poolfs/internal/clustermap"
	"poolfs/internal/erasure"
	"poolfs/internal/meta"
	"poolfs/internal/placement"
)

// TestQueueSyncsBeforeDeleting: a replaced generation's fragments are
// deleted only after every up drive (clients write the replacing
// generation deferred) and the store were synced, so a power loss cannot
// take the new generation after the old one is gone nor bring back
// metadata naming deleted fragments; a down drive is not asked to sync.
func TestQueueSyncsBeforeDeleting(t *testing.T) {
	r := newRig(5)
	r.maps.setState(4, clustermap.StateDown)
	keys := r.queue(1, 10, 1, now, 0, 1, 2)
	rep, err := r.c.Run(context.Background(), Args{})
	if err != nil || rep.Queued != 1 || rep.Fragments != 3 || len(rep.Errors) > 0 {
		t.Fatalf("run: %+v, %v; want the item's 3 fragments collected", rep, err)
	}
	for i, k := range keys {
		if r.drives[placement.DriveID(i)].has(k) {
			t.Errorf("fragment %v still on drive %d", k, i)
		}
	}
	if q := r.store.queued(); len(q) != 0 {
		t.Errorf("queue after the run: %v, want empty", q)
	}
	synced := map[string]bool{}
	deleted := 0
	for _, e := range r.log.events() {
		switch {
		case strings.HasPrefix(e, "delete"):
			deleted++
			if len(synced) != 5 { // drives 0-3 and the store
				t.Fatalf("a fragment was deleted after syncing only %v: %v", synced, r.log.events())
			}
		case e == "sync "+placement.DriveID(4).String():
			t.Fatalf("the down drive was asked to sync: %v", r.log.events())
		default:
			synced[e] = true
		}
	}
	if deleted != 3 {
		t.Fatalf("%d deletes, want 3: %v", deleted, r.log.events())
	}
}

// TestQueueDownDrive: an item with a fragment on a down drive stays queued
// without blocking the items behind it, and the down drive is not asked;
// once the drive is up the item is collected; an item on a failed or out
// drive is collected without asking that drive (it holds nothing).
func TestQueueDownDrive(t *testing.T) {
	ctx := context.Background()
	r := newRig(4)
	r.maps.setState(0, clustermap.StateDown)
	stuck := r.queue(1, 10, 1, now, 0, 1)
	behind := r.queue(2, 11, 1, now, 1, 2)
	rep, err := r.c.Run(ctx, Args{})
	if err != nil || rep.Queued != 1 || len(rep.Errors) > 0 {
		t.Fatalf("run with drive 0 down: %+v, %v; want one item collected, no errors", rep, err)
	}
	if q := r.store.queued(); !slices.Equal(q, []uint64{1}) {
		t.Fatalf("queue: %v, want [1] (the item on the down drive)", q)
	}
	if r.drives[1].has(behind[0]) || r.drives[2].has(behind[1]) {
		t.Fatal("the item behind the stuck one kept its fragments")
	}
	if !r.drives[0].has(stuck[0]) || r.drives[0].deletes != 0 {
		t.Fatalf("the down drive was asked to delete (%d deletes)", r.drives[0].deletes)
	}

	r.maps.setState(0, clustermap.StateUp)
	if rep, err := r.c.Run(ctx, Args{}); err != nil || rep.Queued != 1 {
		t.Fatalf("run with drive 0 up: %+v, %v", rep, err)
	}
	if r.drives[0].has(stuck[0]) || len(r.store.queued()) != 0 {
		t.Fatalf("drive 0 up again: fragment kept %v, queue %v", r.drives[0].has(stuck[0]), r.store.queued())
	}

	for _, st := range []clustermap.DriveState{clustermap.StateFailed, clustermap.StateOut} {
		t.Run(string(st), func(t *testing.T) {
			r := newRig(4)
			r.maps.setState(0, st)
			keys := r.queue(1, 10, 1, now, 0, 1)
			rep, err := r.c.Run(ctx, Args{})
			if err != nil || rep.Queued != 1 || rep.Fragments != 1 || rep.Left != 1 {
				t.Fatalf("run: %+v, %v; want the item collected: 1 fragment deleted, the one on drive 0 left", rep, err)
			}
			if r.drives[0].deletes != 0 || r.drives[1].has(keys[1]) {
				t.Fatalf("drive 0 asked %d times; drive 1 kept its fragment: %v", r.drives[0].deletes, r.drives[1].has(keys[1]))
			}
		})
	}
}

// TestQueueDeleteErrorKeepsItem: a delete that fails is reported and
// keeps its item queued for the next run; the other items are collected.
func TestQueueDeleteErrorKeepsItem(t *testing.T) {
	r := newRig(3)
	r.drives[2].deleteErr = errors.New("read-only file system")
	r.queue(1, 10, 1, now, 1, 2)
	r.queue(2, 11, 1, now, 0, 1)
	rep, err := r.c.Run(context.Background(), Args{})
	if err != nil || rep.Queued != 1 || len(rep.Errors) != 1 || !strings.Contains(rep.Errors[0], "read-only file system") {
		t.Fatalf("run: %+v, %v; want one item collected and the failed delete reported", rep, err)
	}
	if q := r.store.queued(); !slices.Equal(q, []uint64{1}) {
		t.Fatalf("queue: %v, want [1]", q)
	}
}

// TestOrphanScan: the orphan scan deletes, on up drives only, the
// fragments older than the grace whose generation is not committed, and
// keeps committed ones and those within the grace (a write in flight).
func TestOrphanScan(t *testing.T) {
	r := newRig(2)
	r.maps.setState(1, clustermap.StateDown)
	old, recent := now.Add(-2*time.Hour), now.Add(-time.Minute)
	orphan := erasure.FragmentKey{Ino: 10, Gen: 1}
	committed := erasure.FragmentKey{Ino: 11, Gen: 3}
	inFlight := erasure.FragmentKey{Ino: 12, Gen: 1}
	onDown := erasure.FragmentKey{Ino: 13, Gen: 1}
	r.drives[0].frags[orphan] = old
	r.drives[0].frags[committed] = old
	r.drives[0].frags[inFlight] = recent
	r.drives[1].frags[onDown] = old
	r.store.committed[genKey{11, 0, 3}] = true
	rep, err := r.c.Run(context.Background(), Args{Orphans: true, Grace: time.Hour})
	if err != nil || rep.Orphans != 1 || rep.Scanned != 3 || len(rep.Errors) > 0 {
		t.Fatalf("run: %+v, %v; want 1 orphan of 3 fragments scanned", rep, err)
	}
	if r.drives[0].has(orphan) {
		t.Error("the orphan past the grace is still there")
	}
	for _, k := range []erasure.FragmentKey{committed, inFlight} {
		if !r.drives[0].has(k) {
			t.Errorf("fragment %v was deleted", k)
		}
	}
	if !r.drives[1].has(onDown) || r.drives[1].deletes != 0 {
		t.Error("the down drive was scanned")
	}
	if r.guard.verified != 1 {
		t.Errorf("store verified %d times, want 1", r.guard.verified)
	}
}

// TestTempFiles: the orphan run removes unfinished put files older than
// the grace in every directory, past the first page of a large one, and
// keeps recent ones and files not named as put's.
func TestTempFiles(t *testing.T) {
	r := newRig(1)
	old, recent := now.Add(-2*time.Hour), now.Add(-time.Minute)
	st := r.store
	st.add(meta.RootIno, ".poolfs-put.a", 2, meta.TypeFile, old)
	st.add(meta.RootIno, "d", 3, meta.TypeDir, old)
	st.add(3, ".poolfs-put.b", 4, meta.TypeFile, recent)
	st.add(3, "plain", 5, meta.TypeFile, old)
	st.add(3, ".poolfs-put.c", 6, meta.TypeDir, old) // a directory is not a put file
	for i := range readdirBatch + 10 {
		st.add(3, fmt.Sprintf("f%05d", i), meta.Ino(100+i), meta.TypeFile, old)
	}
	st.add(3, "zdir", 7, meta.TypeDir, old) // sorts last, on the second page
	st.add(7, ".poolfs-put.late", 8, meta.TypeFile, old)
	rep, err := r.c.Run(context.Background(), Args{Orphans: true, Grace: time.Hour})
	if err != nil || rep.TempFiles != 2 {
		t.Fatalf("run: %+v, %v; want 2 put files removed", rep, err)
	}
	if got := st.names(meta.RootIno); !slices.Equal(got, []string{"d"}) {
		t.Errorf("root: %v, want [d]", got)
	}
	got := st.names(3)
	for _, name := range []string{".poolfs-put.b", "plain", ".poolfs-put.c", "zdir", "f01033"} {
		if !slices.Contains(got, name) {
			t.Errorf("%s was removed", name)
		}
	}
	if got := st.names(7); len(got) != 0 {
		t.Errorf("zdir: %v, want the put file removed", got)
	}
}

// TestGuard: nothing is deleted, nor the queue read, once the guard says
// deletion stopped; an orphan run whose store check fails deletes nothing
// and says why; a queue run does not need the check.
func TestGuard(t *testing.T) {
	ctx := context.Background()
	stopped := errors.New("deletion stopped (test)")
	t.Run("stopped", func(t *testing.T) {
		for _, orphans := range []bool{false, true} {
			r := newRig(2)
			keys := r.queue(1, 10, 1, now, 0, 1)
			r.drives[0].frags[erasure.FragmentKey{Ino: 20, Gen: 1}] = now.Add(-time.Hour)
			r.guard.stopped = stopped
			if _, err := r.c.Run(ctx, Args{Orphans: orphans}); !errors.Is(err, stopped) {
				t.Fatalf("orphans %v: %v, want the guard's error", orphans, err)
			}
			if r.store.lists != 0 || r.drives[0].deletes+r.drives[1].deletes != 0 || !r.drives[0].has(keys[0]) {
				t.Fatalf("orphans %v: queue read %d times, %d deletes", orphans, r.store.lists, r.drives[0].deletes+r.drives[1].deletes)
			}
		}
	})
	t.Run("unverified", func(t *testing.T) {
		r := newRig(2)
		r.queue(1, 10, 1, now, 0, 1)
		orphan := erasure.FragmentKey{Ino: 20, Gen: 1}
		r.drives[0].frags[orphan] = now.Add(-time.Hour)
		r.guard.verifyErr = errCorrupt
		_, err := r.c.Run(ctx, Args{Orphans: true})
		if !errors.Is(err, errCorrupt) || !strings.Contains(err.Error(), "verified sound") {
			t.Fatalf("orphan run on an unverified store: %v", err)
		}
		if !r.drives[0].has(orphan) || r.drives[0].deletes+r.drives[1].deletes != 0 {
			t.Fatal("an orphan run on an unverified store deleted a fragment")
		}
		if rep, err := r.c.Run(ctx, Args{}); err != nil || rep.Queued != 1 || r.guard.verified != 1 {
			t.Fatalf("queue run: %+v, %v (store checked %d times, want only by the orphan run)", rep, err, r.guard.verified)
		}
	})
}

// TestQueuedMoveSparesAFragmentMovedBack: an item queued when fragment 1
// of a generation moved off drive 1 (a resync) waits in the queue (here:
// it is simply not collected yet) while the fragment moves back onto
// drive 1 (the drive away again, its stripes placed where they were).
// The generation is still committed and its record names drive 1 at index
// 1: the collector leaves that fragment and drops the item. The control
// item, whose moved fragment stayed away, is deleted.
func TestQueuedMoveSparesAFragmentMovedBack(t *testing.T) {
	r := newRig(4)
	moved := func(seq uint64, ino meta.Ino, from uint32) erasure.FragmentKey {
		k := erasure.FragmentKey{Ino: uint64(ino), Gen: 7, Index: 1}
		r.drives[placement.DriveID(from)].frags[k] = now
		r.store.queue = append(r.store.queue, meta.GCItem{Seq: seq, Ino: ino, Gen: 7, Drives: []uint32{meta.NoDrive, from}, ShardSize: 4096})
		return k
	}
	back, away := moved(1, 10, 1), moved(2, 11, 2)
	r.store.records = map[meta.Ino][]meta.StripeRec{
		10: {{Stripe: 0, Gen: 7, Drives: []uint32{0, 1}}}, // moved back onto drive 1
		11: {{Stripe: 0, Gen: 7, Drives: []uint32{0, 3}}}, // on drive 3 now
	}
	rep, err := r.c.Run(context.Background(), Args{})
	if err != nil || rep.Queued != 2 || len(rep.Errors) > 0 {
		t.Fatalf("run: %+v, %v; want both items done", rep, err)
	}
	// One fragment deleted; the one moved back and the two on no drive
	// are reported left, not deleted.
	if rep.Fragments != 1 || rep.Left != 3 {
		t.Fatalf("run: %+v; want 1 fragment deleted, 3 left", rep)
	}
	if !r.drives[1].has(back) {
		t.Fatal("the collector deleted a fragment that had moved back onto the drive its item named")
	}
	if r.drives[2].has(away) {
		t.Fatal("the fragment that moved away was not collected")
	}
	if q := r.store.queued(); len(q) != 0 {
		t.Fatalf("queue after the run: %v, want empty", q)
	}
}
