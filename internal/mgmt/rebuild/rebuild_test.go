package rebuild

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"poolfs/internal/clustermap"
	"poolfs/internal/meta"
	"poolfs/internal/placement"
	"poolfs/internal/storage"
)

// TestRestoresFailedDrive: with a drive failed, a pass runs one
// reconstruct task per stripe that had a fragment on it, on the server of
// a drive the stripe does not use, from the stripe's up fragments, and
// commits the new drives; the run starts with rebuild.start and is
// recorded, and the next pass, with nothing left, ends it with
// rebuild.done and removes the record.
func TestRestoresFailedDrive(t *testing.T) {
	r := newRig(t, 24)
	lost := r.on(2)
	if len(lost) == 0 {
		t.Fatal("no stripe on drive 2")
	}
	r.maps.setState(t, clustermap.StateFailed, 2)
	if !r.pass(t) {
		t.Fatal("a pass that ran tasks asks for another")
	}
	tasks := r.servers.tasks()
	if len(tasks) != len(lost) {
		t.Fatalf("%d tasks, want one per stripe on drive 2 (%d)", len(tasks), len(lost))
	}
	for _, a := range tasks {
		before := r.store.rec(a.Ino, 0)
		if a.K != 2 || a.M != 1 || a.Pool != rigPool || a.Gen != 1 || a.ShardSize != 4096 || a.StripeLen != 8192 || len(a.Targets) != 1 {
			t.Fatalf("task %+v", a)
		}
		if a.Targets[0].Drive == 2 || len(a.Sources) < 2 {
			t.Fatalf("task %+v: target the failed drive or too few sources", a)
		}
		for _, s := range a.Sources {
			if s.Drive == 2 {
				t.Fatalf("task %+v reads the failed drive", a)
			}
		}
		if slices.Contains(before.Drives, 2) {
			t.Fatalf("inode %d still on drive 2 after its task: %v", a.Ino, before.Drives)
		}
		if before.Drives[a.Targets[0].Index] != uint32(a.Targets[0].Drive) {
			t.Fatalf("inode %d: fragment %d committed on %v, rebuilt on %v", a.Ino, a.Targets[0].Index, before.Drives, a.Targets[0].Drive)
		}
	}
	st := r.c.Status()
	if !st.Active || st.Kind != "rebuild" || st.Tasks != len(lost) || st.Done != len(lost) || st.Failed != 0 || st.Critical != 0 {
		t.Fatalf("status after the pass %+v", st)
	}
	want := int64(len(lost) * 3 * (4096 + 64)) // two sources and one target per task, fragment header included
	if st.Bytes == 0 || st.BytesDone != st.Bytes || st.Bytes < int64(len(lost)*3*4096) || st.Bytes > want*2 {
		t.Fatalf("bytes %d of %d, want about %d", st.BytesDone, st.Bytes, want)
	}
	if rec, ok := r.runs.Get("3"); !ok || rec.Kind != "rebuild" || rec.Started != st.Started {
		t.Fatalf("run record %+v %v, want the run's", rec, ok)
	}
	if k := r.events.kinds(); !slices.Equal(k, []string{EventStart}) {
		t.Fatalf("events %v", k)
	}
	if e := r.events.all()[0]; e.subject != "pool/p" || !strings.Contains(e.msg, fmt.Sprintf("%d stripes to restore (%d critical", len(lost), len(lost))) {
		t.Fatalf("start event %+v", e)
	}
	if r.pass(t) {
		t.Fatal("a pass with nothing to do asks for another")
	}
	if _, ok := r.runs.Get("3"); ok {
		t.Fatal("the run's record outlives it")
	}
	if k := r.events.kinds(); !slices.Equal(k, []string{EventStart, EventDone}) {
		t.Fatalf("events %v", k)
	}
	if st := r.c.Status(); st.Active || st.Incomplete != "" || st.Degraded+st.Critical != 0 || st.DriveIO[placement.DriveID(2).String()] != 0 {
		t.Fatalf("status after the run %+v", st)
	}
	if len(r.servers.tasks()) != len(lost) {
		t.Fatal("the last pass ran tasks")
	}
}

// TestEveryTaskFailing: a pass whose every task fails ends the run as
// incomplete, saying why; the passes after it try again without a second
// start or incomplete event, until the drive states change, and leave no
// run recorded (a next leader would take a retry that failed for a run
// under way).
func TestEveryTaskFailing(t *testing.T) {
	r := newRig(t, 12)
	r.servers.fail = func(*storage.ReconstructArgs) error { return errDown }
	n := len(r.on(4))
	r.maps.setState(t, clustermap.StateFailed, 4)
	for i := range 3 {
		if r.pass(t) {
			t.Fatal("a pass whose every task failed asks for another at once")
		}
		if _, ok := r.runs.Get("3"); ok {
			t.Fatalf("pass %d: an ended run is still recorded", i+1)
		}
	}
	if got := len(r.servers.tasks()); got != 3*n {
		t.Fatalf("%d tasks tried, want %d in each of 3 passes", got, n)
	}
	st := r.c.Status()
	if st.Active || !strings.Contains(st.Incomplete, fmt.Sprintf("%d of %d tasks failed, the last with: stripe", n, n)) ||
		!strings.Contains(st.LastError, errDown.Error()) || st.Failed != n {
		t.Fatalf("status %+v", st)
	}
	if k := r.events.kinds(); !slices.Equal(k, []string{EventStart, EventIncomplete}) {
		t.Fatalf("events %v, want one start and one incomplete", k)
	}
	// New drive states: a new story, told again (the tasks now succeed;
	// the stripes on both failed drives are lost).
	r.servers.fail = nil
	r.maps.setState(t, clustermap.StateFailed, 5)
	for r.pass(t) {
	}
	evs := r.events.all()
	if k := r.events.kinds(); !slices.Equal(k, []string{EventStart, EventIncomplete, EventStart, EventIncomplete}) ||
		strings.Contains(evs[3].msg, "tasks failed") || !strings.Contains(evs[3].msg, "cannot be restored") {
		t.Fatalf("events %+v", evs)
	}
}

// TestConflictSkipped: a task whose stripe a client rewrote meanwhile
// (the compare-and-set fails) is skipped, not failed, and the run is not
// stuck.
func TestConflictSkipped(t *testing.T) {
	r := newRig(t, 12)
	r.store.conflict = true
	n := len(r.on(1))
	r.maps.setState(t, clustermap.StateFailed, 1)
	if !r.pass(t) {
		t.Fatal("a pass with skipped tasks asks for another")
	}
	st := r.c.Status()
	if st.Skipped != n || st.Failed != 0 || st.Done != 0 || st.Incomplete != "" || !st.Active {
		t.Fatalf("status %+v, want %d skipped", st, n)
	}
	if r.store.replaced != 0 {
		t.Fatal("a lost compare-and-set changed a record")
	}
}

// TestLostFiles: stripes that lost more fragments than parity covers are
// named once through Events.Lost, listed in the status with their paths
// while they are lost, and leave the list when their file is removed; the
// pool is incomplete, said once.
func TestLostFiles(t *testing.T) {
	r := newRig(t, 40)
	var both []uint64
	for _, ino := range r.on(0) {
		if slices.Contains(r.on(1), ino) {
			both = append(both, ino)
		}
	}
	if len(both) == 0 {
		t.Fatal("no stripe on drives 0 and 1")
	}
	r.maps.setState(t, clustermap.StateFailed, 0, 1)
	for r.pass(t) {
	}
	r.pass(t)
	calls := r.events.lostCalls()
	if len(calls) != 1 || len(calls[0]) != len(both) {
		t.Fatalf("Lost calls %v, want one naming %v", calls, both)
	}
	st := r.c.Status()
	if st.LostStripes != len(both) || len(st.Lost) != len(both) || !strings.Contains(st.Incomplete, "cannot be restored") {
		t.Fatalf("status %+v", st)
	}
	for i, f := range st.Lost {
		if f.Ino != both[i] || f.Path != fmt.Sprintf("/f%d", f.Ino) || !slices.Equal(f.Stripes, []uint64{0}) {
			t.Fatalf("lost file %+v, want inode %d", f, both[i])
		}
	}
	if k := r.events.kinds(); !slices.Equal(k, []string{EventStart, EventIncomplete}) {
		t.Fatalf("events %v: want the run's start and its end, incomplete, and nothing more", k)
	}
	for _, ino := range both {
		r.store.remove(ino, 0)
	}
	r.pass(t)
	if st := r.c.Status(); st.Lost != nil || st.LostStripes != 0 || st.Incomplete != "" {
		t.Fatalf("status after removing the lost files %+v", st)
	}
}

// TestTooFewDrives: with fewer drives up than a stripe is wide no task
// can have a target: the pool is incomplete with the reason, announced
// once, and the stripes are still counted.
func TestTooFewDrives(t *testing.T) {
	r := newRig(t, 12)
	r.maps.setState(t, clustermap.StateFailed, 0, 1, 2, 3)
	r.pass(t)
	r.pass(t)
	st := r.c.Status()
	if !strings.Contains(st.Incomplete, "2 drives up, 2+1 stripes need 3: replace or add drives") || st.Stripes != 12 || st.Active {
		t.Fatalf("status %+v", st)
	}
	if k := r.events.kinds(); !slices.Equal(k, []string{EventIncomplete}) {
		t.Fatalf("events %v, want one incomplete", k)
	}
	if len(r.servers.tasks()) != 0 {
		t.Fatal("tasks ran without targets")
	}
}

// TestResumeCarriesRunOn: a run recorded by a previous coordinator is
// active after Resume with its kind and start; the first pass with
// nothing to do ends it, the end event counting the whole run. A run this
// coordinator had that is no longer recorded is no longer active.
func TestResumeCarriesRunOn(t *testing.T) {
	r := newRig(t, 4)
	started := time.Now().Add(-time.Minute).UnixNano()
	r.runs.Set(context.Background(), "3", Record{Kind: "rebuild", Started: started}, false)
	if err := r.c.Resume(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := r.c.Status(); !st.Active || st.Kind != "rebuild" || st.Started != started || st.Pool != rigPool {
		t.Fatalf("resumed status %+v", st)
	}
	r.pass(t)
	evs := r.events.all()
	if len(evs) != 1 || evs[0].kind != EventDone || !strings.HasPrefix(evs[0].msg, "rebuild finished in 1m") || evs[0].dur < time.Minute {
		t.Fatalf("events %+v, want one rebuild.done over the whole run", evs)
	}
	if _, ok := r.runs.Get("3"); ok {
		t.Fatal("the ended run is still recorded")
	}
	// Another leader's run, then its end while this one stood by.
	r.runs.Set(context.Background(), "3", Record{Kind: "rebalance", Started: started}, false)
	if err := r.c.Resume(context.Background()); err != nil || !r.c.Status().Active {
		t.Fatalf("resume: %v, %+v", err, r.c.Status())
	}
	r.runs.Set(context.Background(), "3", Record{}, true)
	if err := r.c.Resume(context.Background()); err != nil || r.c.Status().Active {
		t.Fatalf("a run no longer recorded: %v, %+v", err, r.c.Status())
	}
	r.runs.Set(context.Background(), "x", Record{Kind: "rebuild"}, false)
	if err := r.c.Resume(context.Background()); err == nil {
		t.Fatal("a record under a key that is no pool ID was taken")
	}
}

// TestPoolErrorDoesNotHoldOthers: a pool whose scan fails has the error
// in its status and in the pass's; another pool is still rebuilt.
func TestPoolErrorDoesNotHoldOthers(t *testing.T) {
	r := newRig(t, 8)
	r.maps.update(t, func(m *clustermap.Map) {
		var ids []placement.DriveID
		for i := 6; i < 10; i++ {
			id := placement.DriveID(i)
			ids = append(ids, id)
			m.Drives = append(m.Drives, clustermap.Drive{ID: id, Server: "s0", State: clustermap.StateUp, Capacity: 1 << 30, Pool: 1})
		}
		m.Pools = append([]clustermap.Pool{{ID: 1, Name: "q", K: 2, M: 1, Unit: 1 << 16, Drives: ids,
			PGs: placement.DefaultPGs(4, 3), Layout: placement.Declustered}}, m.Pools...)
	})
	r.store.listErr[1] = errors.New("index unreadable")
	n := len(r.on(3))
	r.maps.setState(t, clustermap.StateFailed, 3)
	again, err := r.c.Pass(context.Background())
	if err == nil || !strings.Contains(err.Error(), `pool "q": index unreadable`) || !again {
		t.Fatalf("pass: again %v, %v", again, err)
	}
	st := r.c.Status()
	if len(st.Pools) != 2 || !strings.Contains(st.Pools[0].LastError, "index unreadable") || st.Pools[1].Done != n || st.Pools[1].LastError != "" {
		t.Fatalf("status %+v", st)
	}
}

// TestScanSkipsRewrittenAndPages: the scan reads a PG past the index's
// page size and skips a stripe whose record is newer than its index entry
// (rewritten since), or gone.
func TestScanSkipsRewrittenAndPages(t *testing.T) {
	r := newRig(t, 0)
	for i := range 1500 {
		r.store.put(rigPool, uint64(1000+i), meta.StripeRec{Gen: 1, PG: 7, Drives: []uint32{0, 1, 2}, K: 2})
	}
	idx := &staleIndex{fakeStore: r.store, gen: map[uint64]uint64{1003: 2}}
	r.c.d.Store = idx
	m, _ := r.maps.Map(context.Background())
	st, recs, err := r.c.Scan(context.Background(), &m.Pools[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != 1499 || len(recs) != 1499 {
		t.Fatalf("scanned %d stripes (%d records), want 1499", len(st), len(recs))
	}
	for i, s := range st {
		if s.Ino == 1003 || s.PG != 7 || s.K != 2 || recs[i].Gen != s.Gen || (i > 0 && s.Ino <= st[i-1].Ino) {
			t.Fatalf("stripe %d: %+v", i, s)
		}
	}
}

// staleIndex lists one inode's stripe at another generation than its
// record's, as an index read before a rewrite does.
type staleIndex struct {
	*fakeStore
	gen map[uint64]uint64
}

func (s *staleIndex) ListPG(ctx context.Context, pool, pg uint32, after meta.StripeRef, limit int) ([]meta.StripeRef, error) {
	refs, err := s.fakeStore.ListPG(ctx, pool, pg, after, limit)
	for i := range refs {
		if g, ok := s.gen[uint64(refs[i].Ino)]; ok {
			refs[i].Gen = g
		}
	}
	return refs, err
}

// TestDriveStateChangeReplans: a pass under way ends early, asking for
// another, when its pool's drive states change, and is not counted stuck.
func TestDriveStateChangeReplans(t *testing.T) {
	r := newRig(t, 12)
	r.servers.block = make(chan struct{})
	r.maps.setState(t, clustermap.StateFailed, 0)
	go func() {
		time.Sleep(50 * time.Millisecond)
		r.maps.setState(t, clustermap.StateDown, 5)
	}()
	if !r.pass(t) {
		t.Fatal("a pass cut short by new drive states does not ask for another")
	}
	if st := r.c.Status(); st.Incomplete != "" || !st.Active || st.Done != 0 {
		t.Fatalf("status %+v", st)
	}
	if k := r.events.kinds(); !slices.Equal(k, []string{EventStart}) {
		t.Fatalf("events %v", k)
	}
}

// TestReadRepairsCounted: read repairs add up in the status.
func TestReadRepairsCounted(t *testing.T) {
	r := newRig(t, 0)
	r.c.ReadRepaired(3)
	r.c.ReadRepaired(4)
	if got := r.c.Status().ReadRepairs; got != 7 {
		t.Fatalf("read repairs %d, want 7", got)
	}
}

// TestTaskWaitsForQueuedDelete: a task that would write a fragment onto a
// drive from which the GC queue still deletes that fragment (an item of
// an earlier move off it) does not run: the collector would delete the
// copy between the write and the commit. A pass whose only task waits
// does not ask for another at once; once the item is gone a pass runs the
// task. A queue
// that cannot be read fails the pass and changes nothing.
func TestTaskWaitsForQueuedDelete(t *testing.T) {
	r := newRig(t, 12)
	r.maps.setState(t, clustermap.StateFailed, 1)
	// Find the tasks' targets: a pass against a blocking fake server
	// would do; plan the same way instead by running one pass on a copy.
	probe := newRig(t, 12)
	probe.maps.setState(t, clustermap.StateFailed, 1)
	probe.pass(t)
	tasks := probe.servers.tasks()
	if len(tasks) == 0 {
		t.Fatal("no tasks to restore drive 1")
	}
	a := tasks[0]
	before := r.store.rec(a.Ino, a.Stripe)
	drives := make([]uint32, len(before.Drives))
	for i := range drives {
		drives[i] = meta.NoDrive
	}
	drives[a.Targets[0].Index] = uint32(a.Targets[0].Drive)
	r.store.gc = []meta.GCItem{{Seq: 1, Ino: meta.Ino(a.Ino), Stripe: a.Stripe, Gen: a.Gen, Drives: drives, ShardSize: before.ShardSize}}

	r.store.gcErr = errDown
	if _, err := r.c.Pass(context.Background()); !errors.Is(err, errDown) {
		t.Fatalf("pass over an unreadable queue: %v", err)
	}
	if r.store.replaced != 0 || len(r.servers.tasks()) != 0 {
		t.Fatal("a pass that could not read the queue ran tasks")
	}
	r.store.gcErr = nil

	again := r.pass(t)
	for _, x := range r.servers.tasks() {
		if x.Ino == a.Ino && x.Stripe == a.Stripe {
			t.Fatalf("the task of inode %d ran with a delete of its target fragment queued", a.Ino)
		}
	}
	if got := r.store.rec(a.Ino, a.Stripe); !slices.Equal(got.Drives, before.Drives) {
		t.Fatalf("record changed to %v with the delete queued", got.Drives)
	}
	if st := r.c.Status(); st.Skipped != 1 || st.Done != len(tasks)-1 {
		t.Fatalf("status %+v, want 1 skipped and %d done", st, len(tasks)-1)
	}
	if len(tasks) == 1 && again {
		t.Fatal("a pass whose only task waits asks for another at once")
	}
	// The next pass plans that task alone, and it still waits.
	if r.pass(t) {
		t.Fatal("a pass whose only task waits asks for another at once")
	}
	if got := r.store.rec(a.Ino, a.Stripe); !slices.Equal(got.Drives, before.Drives) {
		t.Fatalf("record changed to %v with the delete queued", got.Drives)
	}
	r.store.mu.Lock()
	r.store.gc = nil // the collector ran
	r.store.mu.Unlock()
	r.pass(t)
	if got := r.store.rec(a.Ino, a.Stripe); got.Drives[a.Targets[0].Index] != uint32(a.Targets[0].Drive) {
		t.Fatalf("record %v after the delete left the queue, want drive %d at %d", got.Drives, a.Targets[0].Drive, a.Targets[0].Index)
	}
}
