package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"poolfs/internal/chunkstore"
	"poolfs/internal/client"
	"poolfs/internal/erasure"
	"poolfs/internal/meta"
	"poolfs/internal/mgmt"
	"poolfs/internal/placement"
	"poolfs/internal/storage"
)

// waitStatus polls the status until ok accepts it, for at most 30 s.
func waitStatus(t *testing.T, conn *Conn, what string, ok func(*mgmt.Status) bool) *mgmt.Status {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := conn.Mgmt.Status(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached in 30s; pools %+v; rebuild %+v", what, st.Pools, st.Rebuild)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func hasNote(p mgmt.PoolStatus, s string) bool {
	for _, n := range p.Notes {
		if strings.Contains(n, s) {
			return true
		}
	}
	return false
}

func eventsOf(t *testing.T, conn *Conn, kind string) []meta.Event {
	t.Helper()
	evs, err := conn.Mgmt.Events(context.Background(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []meta.Event
	for _, e := range evs {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// TestStatusHealthFollowsTheData: health is the redundancy of the data.
// A failed drive whose data was rebuilt leaves the pool healthy with a
// note to replace it, and its capacity is no longer counted; one drive down
// in an 8+2 pool is degraded, not critical; a replaced drive is no longer
// counted among the pool's drives.
func TestStatusHealthFollowsTheData(t *testing.T) {
	c, conn := startRebuildTest(t, Config{Drives: 12})
	ctx := context.Background()
	files := fillFiles(t, conn, 20, 8, 16<<10)
	if err := conn.Mgmt.FailDrive(ctx, 3); err != nil {
		t.Fatal(err)
	}
	waitHealthy(t, c)
	st := waitStatus(t, conn, "healthy after the rebuild", func(st *mgmt.Status) bool { return st.Health == mgmt.HealthOK })
	p := st.Pools[0]
	if !hasNote(p, "drive d03 failed: replace it") {
		t.Fatalf("notes %q do not ask to replace d03", p.Notes)
	}
	if p.Capacity.Raw != 11*(256<<20) || p.FailedRaw != 256<<20 {
		t.Fatalf("raw capacity %d with %d on failed drives; want 11 drives counted, 1 failed", p.Capacity.Raw, p.FailedRaw)
	}
	if p.Capacity.Preservation != p.PreservationReserved-256<<20 {
		t.Fatalf("preservation left %d of %d: the rebuild consumed one drive's worth", p.Capacity.Preservation, p.PreservationReserved)
	}
	if p.Drives != 12 || p.DrivesUp != 11 {
		t.Fatalf("%d/%d drives up, want 11/12", p.DrivesUp, p.Drives)
	}

	// One drive down on top: degraded, with the time left before it fails.
	if err := conn.Mgmt.DriveFault(ctx, storage.FaultArgs{Drive: 5, Op: "offline"}); err != nil {
		t.Fatal(err)
	}
	st = waitStatus(t, conn, "the down drive's stripes counted", func(st *mgmt.Status) bool {
		return st.Rebuild.Unavailable > 0 && st.Pools[0].Health != mgmt.HealthOK
	})
	if p := st.Pools[0]; p.Health != mgmt.HealthDegraded || !hasNote(p, "drive d05 down: declared failed and rebuilt in") {
		t.Fatalf("one drive down in 8+2 after a rebuild: health %q, notes %q; want degraded and the grace left", p.Health, p.Notes)
	}
	if err := conn.Mgmt.DriveFault(ctx, storage.FaultArgs{Drive: 5, Op: "online"}); err != nil {
		t.Fatal(err)
	}
	waitHealthy(t, c)

	// Replace d03 and add a drive: 13 drives, all up, healthy, no note.
	if _, err := conn.Mgmt.ReplaceDrive(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Mgmt.AddDrive(ctx, ""); err != nil {
		t.Fatal(err)
	}
	waitHealthy(t, c)
	st = waitStatus(t, conn, "healthy after replace and add", func(st *mgmt.Status) bool { return st.Health == mgmt.HealthOK })
	p = st.Pools[0]
	if p.Drives != 13 || p.DrivesUp != 13 || len(st.Drives) != 13 || len(p.Notes) != 0 {
		t.Fatalf("after replace and add: %d/%d drives up, %d listed, notes %q; want 13/13, 13, none",
			p.DrivesUp, p.Drives, len(st.Drives), p.Notes)
	}
	if p.Capacity.Raw != 13*(256<<20) || p.Capacity.Preservation != p.PreservationReserved {
		t.Fatalf("raw %d, preservation %d of %d after replace and add", p.Capacity.Raw, p.Capacity.Preservation, p.PreservationReserved)
	}
	verifyFiles(t, conn, files)
}

// TestRebuildThatCannotFinish: three drives fail in a 12-drive 8+2 pool.
// Nine drives cannot hold a 10-wide stripe: recovery says so, as an event
// (never "finished") and in status, and counts the stripes it cannot
// restore; the lost files leave the list once they are removed.
func TestRebuildThatCannotFinish(t *testing.T) {
	c, conn := startRebuildTest(t, Config{Drives: 12})
	ctx := context.Background()
	files := fillFiles(t, conn, 30, 8, 16<<10)
	slowAll(t, c, 50*time.Millisecond) // nothing gets rebuilt in between
	for _, id := range []placement.DriveID{1, 2, 3} {
		if err := conn.Mgmt.FailDrive(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	slowAll(t, c, 0)
	st := waitStatus(t, conn, "data loss reported", func(st *mgmt.Status) bool {
		return st.Health == mgmt.HealthDataLoss && st.Rebuild.Incomplete != ""
	})
	rb := st.Rebuild
	if rb.Stripes == 0 || rb.LostStripes == 0 || len(rb.Lost) == 0 {
		t.Fatalf("rebuild status %+v: want stripes, lost stripes and lost files counted", rb)
	}
	if !strings.Contains(rb.Incomplete, "9 drives up, 8+2 stripes need 10") {
		t.Fatalf("incomplete reason %q does not say there are too few drives", rb.Incomplete)
	}
	if p := st.Pools[0]; !hasNote(p, "rebuild cannot finish: 9 drives up") || !hasNote(p, "DATA LOSS") {
		t.Fatalf("pool notes %q lack the reason and the loss", p.Notes)
	}
	inc := eventsOf(t, conn, mgmt.EventRebuildIncomplete)
	if len(inc) == 0 || !strings.Contains(inc[len(inc)-1].Message, "9 drives up") || inc[len(inc)-1].Subject != "pool/default" {
		t.Fatalf("rebuild.incomplete events %+v: want one naming pool/default and the reason", inc)
	}
	// The last run-end event after the third failure must not say finished.
	evs, _ := conn.Mgmt.Events(ctx, 0, 0)
	var last meta.Event
	for _, e := range evs {
		if e.Kind == mgmt.EventRebuildDone || e.Kind == mgmt.EventRebuildIncomplete {
			last = e
		}
	}
	if last.Kind != mgmt.EventRebuildIncomplete {
		t.Fatalf("last end-of-rebuild event %+v, want rebuild.incomplete", last)
	}
	// Remove the lost files: they leave the status at the next scan.
	for _, f := range rb.Lost {
		if err := conn.Client.Remove(ctx, f.Path); err != nil {
			t.Fatalf("rm %s: %v", f.Path, err)
		}
		delete(files, f.Path)
	}
	st = waitStatus(t, conn, "lost files gone from status", func(st *mgmt.Status) bool {
		return len(st.Rebuild.Lost) == 0 && st.Rebuild.LostStripes == 0
	})
	if st.Health == mgmt.HealthDataLoss {
		t.Fatalf("health %q with no lost stripe left", st.Health)
	}
}

// TestRebuildStatusPerPool: with two pools, the rebuild of pool 0 is
// reported as pool 0's (events and status), and the stripe counts are
// those of all pools, not of the last one scanned.
func TestRebuildStatusPerPool(t *testing.T) {
	c, conn := startRebuildTest(t, Config{Drives: 12})
	ctx := context.Background()
	if _, err := conn.Mgmt.CreatePool(ctx, mgmt.PoolSpec{Name: "second", Drives: 12, K: 8, M: 2, Unit: 16 << 10,
		DriveSize: 256 << 20, Preservation: -1}); err != nil {
		t.Fatal(err)
	}
	files := fillFiles(t, conn, 20, 8, 16<<10)
	if err := conn.Mgmt.FailDrive(ctx, 4); err != nil {
		t.Fatal(err)
	}
	h := waitHealthy(t, c)
	waitStatus(t, conn, "rebuild done", func(st *mgmt.Status) bool {
		return !st.Rebuild.Active && len(eventsOf(t, conn, mgmt.EventRebuildDone)) > 0
	})
	for _, e := range eventsOf(t, conn, mgmt.EventRebuildDone) {
		if e.Subject != "pool/default" {
			t.Fatalf("rebuild.done of pool 0 names %q, want pool/default", e.Subject)
		}
	}
	st := waitStatus(t, conn, "stripes counted", func(st *mgmt.Status) bool { return st.Rebuild.Stripes == h.Stripes })
	if len(st.Rebuild.Pools) != 2 || st.Rebuild.Pools[0].Stripes != h.Stripes || st.Rebuild.Pools[1].Stripes != 0 {
		t.Fatalf("per-pool rebuild status %+v, want %d stripes in pool 0 and none in pool 1", st.Rebuild.Pools, h.Stripes)
	}
	if st.Pools[0].Health != mgmt.HealthOK || st.Pools[1].Health != mgmt.HealthOK {
		t.Fatalf("pool health %q %q", st.Pools[0].Health, st.Pools[1].Health)
	}
	verifyFiles(t, conn, files)
}

// corruptFragment flips a bit in the data of fragment index of stripe 0 of
// p (files format) and returns the drive holding it.
func corruptFragment(t *testing.T, c *Cluster, conn *Conn, p string, index int) placement.DriveID {
	t.Helper()
	ctx := context.Background()
	a, err := conn.Client.Resolve(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := conn.Meta.Stripes(ctx, a.Ino, 0, 0)
	if err != nil || len(recs) != 1 {
		t.Fatalf("stripes: %v %v", recs, err)
	}
	id := placement.DriveID(recs[0].Drives[index])
	key := erasure.FragmentKey{Ino: uint64(a.Ino), Stripe: 0, Gen: recs[0].Gen, Index: uint8(index)}
	for _, f := range fragmentFiles(t, filepath.Join(c.Config.Dir, "drives", id.String())) {
		b, _ := os.ReadFile(f)
		if h, err := erasure.DecodeHeader(b); err == nil && h.Key == key {
			b[erasure.HeaderSize(int(h.ShardSize))+100] ^= 0x10
			if err := os.WriteFile(f, b, 0o644); err != nil {
				t.Fatal(err)
			}
			return id
		}
	}
	t.Fatalf("fragment %v not found on %v", key, id)
	return 0
}

// TestReadRepairsAreCounted: a fragment a reader finds corrupt and
// rewrites is counted in the status and logged as a read.repair event
// naming its drive.
func TestReadRepairsAreCounted(t *testing.T) {
	c, conn := startTest(t, Config{Drives: 12, Unit: 64 << 10, DriveFormat: chunkstore.FormatFiles})
	data := randBytes(t, 8*(64<<10))
	put(t, conn, "/f", data)
	id := corruptFragment(t, c, conn, "/f", 2)
	if got := get(t, conn, "/f"); !bytes.Equal(got, data) {
		t.Fatal("degraded read returned wrong bytes")
	}
	waitStatus(t, conn, "read repair counted", func(st *mgmt.Status) bool { return st.Rebuild.ReadRepairs == 1 })
	evs := eventsOf(t, conn, mgmt.EventReadRepair)
	if len(evs) != 1 || evs[0].Subject != id.String() || !strings.HasPrefix(evs[0].Message, "1 fragments") {
		t.Fatalf("read.repair events %+v, want one for %v", evs, id)
	}
}

// TestDataLossByInodeNamesIt: a File opened by inode alone (as the mount
// opens them) names the inode in its data-loss error, not an empty name.
func TestDataLossByInodeNamesIt(t *testing.T) {
	c, conn := startTest(t, Config{Drives: 12, Unit: 64 << 10, DriveFormat: chunkstore.FormatFiles})
	ctx := context.Background()
	put(t, conn, "/f", randBytes(t, 8*(64<<10)))
	for i := 0; i < 3; i++ {
		corruptFragment(t, c, conn, "/f", i)
	}
	a, _ := conn.Client.Resolve(ctx, "/f")
	f, err := conn.Client.Open(ctx, a.Ino, "")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, err = f.ReadAt(ctx, make([]byte, 4096), 0)
	if !errors.Is(err, client.ErrDataLoss) || !strings.Contains(err.Error(), fmt.Sprintf("file inode %d stripe 0", a.Ino)) {
		t.Fatalf("read with 3 of 10 fragments corrupt: %v, want data loss naming inode %d", err, a.Ino)
	}
}

// segmentsOnDisk is what the segment files of every drive take on disk.
func segmentsOnDisk(t *testing.T, c *Cluster) int64 {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(c.Config.Dir, "drives", "*", "segs", "*.seg"))
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, p := range segs {
		if fi, err := os.Stat(p); err == nil {
			n += fi.Sys().(*syscall.Stat_t).Blocks * 512
		}
	}
	return n
}

// TestStatusCountsSpaceNotReclaimed: data removed but not yet collected
// still takes space on the drives: status counts it as used
// (reclaimable) until the collector deletes it, and the drives report
// what their files take on the host; what they keep for reuse after the
// collection stays within the stated budget and is reported.
func TestStatusCountsSpaceNotReclaimed(t *testing.T) {
	// Collector every hour and not on a backlog: nothing collected unless asked
	// (the 128 generations removed would start a pass within a second).
	c, conn := startTest(t, Config{Drives: 12, Unit: 64 << 10, GCBacklogOff: true})
	ctx := context.Background()
	data := randBytes(t, 64<<20)
	put(t, conn, "/big", data)
	st0 := waitStatus(t, conn, "status", func(*mgmt.Status) bool { return true })
	raw := int64(st0.Pools[0].UsedRaw)
	if raw < 80<<20 {
		t.Fatalf("64 MiB in 8+2: %d raw bytes used, want 80 MiB", raw)
	}
	if err := conn.Client.Remove(ctx, "/big"); err != nil {
		t.Fatal(err)
	}
	st := waitStatus(t, conn, "status", func(*mgmt.Status) bool { return true })
	p := st.Pools[0]
	if p.UsedRaw != 0 || p.Reclaimable < raw {
		t.Fatalf("removed, not collected: used raw %d, reclaimable %d; want 0 and at least %d", p.UsedRaw, p.Reclaimable, raw)
	}
	var allocated int64
	for _, d := range st.Drives {
		allocated += d.Allocated
		if d.HostFree <= 0 {
			t.Fatalf("drive %s: no host free space reported", d.ID)
		}
	}
	if got := segmentsOnDisk(t, c); allocated != got {
		t.Fatalf("drives report %d bytes on the host, their segment files take %d", allocated, got)
	}
	if _, err := conn.Mgmt.GC(ctx, mgmt.GCArgs{}); err != nil {
		t.Fatal(err)
	}
	st = waitStatus(t, conn, "status", func(*mgmt.Status) bool { return true })
	// The drives may keep deleted small records' space for reuse, within
	// the stated budget of 16 MiB a drive, and status says how much.
	kept := st.Pools[0].Kept
	var drivesKept int64
	for _, d := range st.Drives {
		if d.Kept > 16<<20 {
			t.Fatalf("drive %s keeps %d bytes for reuse, beyond the 16 MiB budget", d.ID, d.Kept)
		}
		drivesKept += d.Kept
	}
	if kept != drivesKept {
		t.Fatalf("pool says %d bytes kept, its drives %d", kept, drivesKept)
	}
	if after := st.Pools[0].Reclaimable; after-kept > p.Reclaimable-raw {
		t.Fatalf("after collection %d bytes reclaimable (%d kept for reuse), before %d: the %d raw bytes removed did not come back", after, kept, p.Reclaimable, raw)
	}
	// What is left is headers and preallocation: a few steps per drive.
	if got := segmentsOnDisk(t, c); got > 12*4*(16<<20)+(8<<20) {
		t.Fatalf("after collection the drives take %d MiB on disk", got>>20)
	}
}

// TestPoolCreateRefusesMoreThanTheHostHas: drives that advertise more than
// the host file system holds are refused with a clear message, or created
// with Force; then status and the event log warn that the host is short.
func TestPoolCreateRefusesMoreThanTheHostHas(t *testing.T) {
	_, conn := startTest(t, Config{Drives: 12, HealthInterval: 50 * time.Millisecond})
	ctx := context.Background()
	spec := mgmt.PoolSpec{Name: "huge", Drives: 12, K: 8, M: 2, Unit: 1 << 20, DriveSize: 100 << 40, Preservation: -1}
	_, err := conn.Mgmt.CreatePool(ctx, spec)
	if err == nil || !strings.Contains(err.Error(), "free") || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("12 drives of 100 TiB: %v, want a refusal naming the free space and --force", err)
	}
	if m, _ := conn.Mgmt.Map(ctx); len(m.Pools) != 1 {
		t.Fatalf("refused pool is in the map: %d pools", len(m.Pools))
	}
	spec.Force = true
	if _, err := conn.Mgmt.CreatePool(ctx, spec); err != nil {
		t.Fatal(err)
	}
	st := waitStatus(t, conn, "host warning", func(st *mgmt.Status) bool { return len(st.Notes) > 0 })
	if !strings.Contains(st.Notes[0], "host file system of server s0") {
		t.Fatalf("status notes %q", st.Notes)
	}
	waitStatus(t, conn, "host.space-low event", func(*mgmt.Status) bool {
		return len(eventsOf(t, conn, mgmt.EventHostSpaceLow)) == 1
	})
}

// TestUpRefusesMoreThanTheHostHas: a new cluster whose drives would
// advertise more than its directory's file system has free is refused
// with the figures, unless overcommit is asked for.
func TestUpRefusesMoreThanTheHostHas(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{Dir: dir, Listen: "127.0.0.1:0", Drives: 12, DriveSize: 100 << 40, GCInterval: time.Hour}
	c, err := Start(context.Background(), cfg)
	if err == nil {
		c.Close()
		t.Fatal("12 drives of 100 TiB accepted")
	}
	if !strings.Contains(err.Error(), "GiB free") || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("refusal %q does not give the free space and the way out", err)
	}
	cfg.Overcommit = true
	c, err = Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

// corruptAll makes every drive of c corrupt the given fraction of reads.
func corruptAll(t *testing.T, c *Cluster, fraction float64) {
	t.Helper()
	m, _ := c.Mgmt.Map(context.Background())
	for _, d := range m.Drives {
		if err := c.storage.Fault(storage.FaultArgs{Drive: d.ID, Op: "corrupt", Fraction: fraction, Seed: 1}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRebuildWhoseTasksAllFail: a rebuild whose every task fails (every
// source reads corrupt) ends as incomplete with the reason, once: its
// retries at each interval are not new events. Once reads are sound again
// a retry finishes it.
func TestRebuildWhoseTasksAllFail(t *testing.T) {
	c, conn := startRebuildTest(t, Config{Drives: 12})
	ctx := context.Background()
	files := fillFiles(t, conn, 10, 8, 16<<10)
	corruptAll(t, c, 1)
	if err := conn.Mgmt.FailDrive(ctx, 6); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, conn, "rebuild.incomplete", func(*mgmt.Status) bool {
		return len(eventsOf(t, conn, mgmt.EventRebuildIncomplete)) > 0
	})
	ev := eventsOf(t, conn, mgmt.EventRebuildIncomplete)[0]
	if !strings.Contains(ev.Message, "tasks failed") || ev.Subject != "pool/default" {
		t.Fatalf("rebuild.incomplete %+v: want the failed tasks as the reason", ev)
	}
	st := waitStatus(t, conn, "incomplete in status", func(st *mgmt.Status) bool { return st.Rebuild.Incomplete != "" })
	if st.Pools[0].Health != mgmt.HealthDegraded || !hasNote(st.Pools[0], "rebuild cannot finish") {
		t.Fatalf("pool %q notes %q: want degraded and the reason", st.Pools[0].Health, st.Pools[0].Notes)
	}
	time.Sleep(3 * time.Second) // three rebuild intervals: three retries
	if n, m := len(eventsOf(t, conn, mgmt.EventRebuildStart)), len(eventsOf(t, conn, mgmt.EventRebuildIncomplete)); n != 1 || m != 1 {
		t.Fatalf("%d rebuild.start and %d rebuild.incomplete events after the retries, want one each", n, m)
	}
	corruptAll(t, c, 0)
	waitHealthy(t, c)
	waitStatus(t, conn, "rebuild.done", func(st *mgmt.Status) bool {
		return len(eventsOf(t, conn, mgmt.EventRebuildDone)) == 1 && st.Rebuild.Incomplete == "" && st.Health == mgmt.HealthOK
	})
	verifyFiles(t, conn, files)
}
