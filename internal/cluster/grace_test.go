package cluster

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"poolfs/internal/clustermap"
	"poolfs/internal/erasure"
	"poolfs/internal/meta"
	"poolfs/internal/mgmt"
	"poolfs/internal/placement"
	"poolfs/internal/recovery"
	"poolfs/internal/storage"
)

type stripeKey struct{ ino, stripe uint64 }

// scanStripes returns the committed stripes of pool 0 by key.
func scanStripes(t *testing.T, c *Cluster) map[stripeKey]recovery.Stripe {
	t.Helper()
	m, err := c.Mgmt.Map(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ss, _, err := c.Mgmt.Scan(context.Background(), &m.Pools[0])
	if err != nil {
		t.Fatal(err)
	}
	out := map[stripeKey]recovery.Stripe{}
	for _, s := range ss {
		out[stripeKey{s.Ino, s.Stripe}] = s
	}
	return out
}

func driveState(t *testing.T, c *Cluster, id placement.DriveID) clustermap.DriveState {
	t.Helper()
	m, err := c.Mgmt.Map(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	d, err := m.Drive(id)
	if err != nil {
		t.Fatal(err)
	}
	return d.State
}

func eventKinds(t *testing.T, conn *Conn) string {
	t.Helper()
	evs, err := conn.Mgmt.Events(context.Background(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range evs {
		kinds = append(kinds, e.Kind)
	}
	return strings.Join(kinds, " ")
}

func ioSum(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// TestDownUpWithinGraceResyncs: a drive goes offline and comes back within
// the grace. While it is down nothing is rebuilt and reads and writes work;
// back up, exactly the stripes written while it was away and placed in PGs
// that include it again move onto it, nothing else moves, the stale
// fragments of stripes rewritten meanwhile are collected, and every byte
// reads back.
func TestDownUpWithinGraceResyncs(t *testing.T) {
	c, conn := startRebuildTest(t, Config{Drives: 12})
	ctx := context.Background()
	const away = placement.DriveID(3)
	if err := conn.Mgmt.SetDownGrace(ctx, "default", time.Minute); err != nil {
		t.Fatal(err)
	}
	files := fillFiles(t, conn, 20, 8, 16<<10)
	before := scanStripes(t, c)

	if err := conn.Mgmt.DriveFault(ctx, storage.FaultArgs{Drive: away, Op: "offline"}); err != nil {
		t.Fatal(err)
	}
	if st := driveState(t, c, away); st != clustermap.StateDown {
		t.Fatalf("offline drive is %s, want down", st)
	}
	verifyFiles(t, conn, files) // degraded reads
	// Written while away: new files of whole stripes, and two rewrites
	// (their old stripes' fragments on the down drive become garbage).
	const stripeBytes = 8 * (16 << 10)
	for i := range 12 {
		p := fmt.Sprintf("/away%02d", i)
		files[p] = randBytes(t, 2*stripeBytes)
		put(t, conn, p, files[p])
	}
	// The old stripes of the rewritten files that have a fragment on the
	// down drive must wait in the GC queue; everything else is collected.
	wantStuck := map[stripeKey]bool{}
	for _, name := range []string{"f001", "f002", "f003"} {
		a, err := c.Store.Lookup(ctx, meta.RootIno, name)
		if err != nil {
			t.Fatal(err)
		}
		for k, s := range before {
			if k.ino == uint64(a.Ino) && slices.Contains(s.Drives, away) {
				wantStuck[k] = true
			}
		}
		p := "/" + name
		files[p] = randBytes(t, 2*stripeBytes)
		put(t, conn, p, files[p])
	}
	if len(wantStuck) == 0 {
		t.Fatal("no rewritten stripe had a fragment on the down drive: test too small")
	}
	during := scanStripes(t, c)
	if _, err := c.Mgmt.GC(ctx, mgmt.GCArgs{}); err != nil {
		t.Fatal(err)
	}
	q, err := c.Store.GCList(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	stuck := map[stripeKey]bool{}
	for _, it := range q {
		stuck[stripeKey{uint64(it.Ino), it.Stripe}] = true
	}
	if !maps.Equal(stuck, wantStuck) {
		t.Fatalf("GC queue while %v is down holds %v, want the rewritten stripes on it %v", away, stuck, wantStuck)
	}
	time.Sleep(1500 * time.Millisecond) // a coordinator pass (RebuildInterval 1s)
	if st := c.Mgmt.Rebuild(); ioSum(st.DriveIO) != 0 || st.Unavailable == 0 {
		t.Fatalf("while down: recovery I/O %v, %d stripes on the down drive; want none and some", st.DriveIO, st.Unavailable)
	}
	for k, s := range during {
		if b, ok := before[k]; !ok || b.Gen != s.Gen {
			if slices.Contains(s.Drives, away) {
				t.Fatalf("stripe %v written while %v was down is on it: %v", k, away, s.Drives)
			}
		}
	}
	// Expected resync: the stripes written while away whose PG includes
	// the drive once it is up again (placement, not the planner).
	m, _ := c.Mgmt.Map(ctx)
	if _, err := m.SetState(away, clustermap.StateUp, time.Now()); err != nil {
		t.Fatal(err)
	}
	pp, _ := m.Placement(0)
	upMap, err := pp.Map()
	if err != nil {
		t.Fatal(err)
	}
	want := map[stripeKey]bool{}
	writtenAway := 0
	for k, s := range during {
		if b, ok := before[k]; !ok || b.Gen != s.Gen {
			writtenAway++
			if slices.Contains(upMap.Sets[s.PG], away) {
				want[k] = true
			}
		}
	}
	if len(want) == 0 {
		t.Fatal("no stripe written while away belongs back on the drive: test too small")
	}
	io0 := c.Mgmt.Rebuild()

	if err := conn.Mgmt.DriveFault(ctx, storage.FaultArgs{Drive: away, Op: "online"}); err != nil {
		t.Fatal(err)
	}
	if st := driveState(t, c, away); st != clustermap.StateUp {
		t.Fatalf("drive back online is %s, want up", st)
	}
	waitRecovered(t, c)
	after := scanStripes(t, c)
	moved := 0
	for k, s := range after {
		d := during[k]
		switch {
		case want[k]:
			diff := 0
			for i := range s.Drives {
				if s.Drives[i] != d.Drives[i] {
					diff++
					if s.Drives[i] != away {
						t.Fatalf("stripe %v: fragment %d moved to %v, not back to %v", k, i, s.Drives[i], away)
					}
				}
			}
			if diff != 1 {
				t.Fatalf("stripe %v: %d fragments moved, want 1: %v -> %v", k, diff, d.Drives, s.Drives)
			}
			moved++
		case !slices.Equal(s.Drives, d.Drives) || s.Gen != d.Gen:
			t.Fatalf("stripe %v moved although it was not written while away: %v -> %v", k, d.Drives, s.Drives)
		}
	}
	if moved != len(want) || len(after) != len(during) {
		t.Fatalf("resync moved %d stripes of %d; %d stripes now, %d before", moved, len(want), len(after), len(during))
	}
	// The coordinator wrote exactly one fragment per resynced stripe, all
	// onto the returned drive (the away files' stripes are full, so every
	// fragment has the same size).
	io1 := c.Mgmt.Rebuild()
	fs := int64(erasure.FragmentSize(16 << 10))
	written := ioSum(io1.DriveWrites) - ioSum(io0.DriveWrites)
	onAway := io1.DriveWrites[away.String()] - io0.DriveWrites[away.String()]
	if written != int64(len(want))*fs || onAway != written {
		t.Fatalf("resync wrote %d bytes (%d on %v), want %d stripes × %d = %d, all on %v",
			written, onAway, away, len(want), fs, int64(len(want))*fs, away)
	}
	verifyFiles(t, conn, files)
	checkBalance(t, c)

	// The stale fragments of the stripes rewritten while away are collected
	// now that the drive answers: it holds only committed generations.
	if rep, err := c.Mgmt.GC(ctx, mgmt.GCArgs{}); err != nil || len(rep.Errors) > 0 {
		t.Fatalf("gc: %v %v", err, rep)
	}
	if q, _ := c.Store.GCList(ctx, 0); len(q) != 0 {
		t.Fatalf("%d GC items left after the drive came back", len(q))
	}
	drv, err := c.storage.Drive(away)
	if err != nil {
		t.Fatal(err)
	}
	var stale []erasure.FragmentKey
	err = drv.ListFragments(ctx, func(k erasure.FragmentKey, _ int64, _ time.Time) error {
		ok, err := c.Store.Committed(ctx, meta.Ino(k.Ino), k.Stripe, k.Gen)
		if err == nil && !ok {
			stale = append(stale, k)
		}
		return err
	})
	if err != nil || len(stale) > 0 {
		t.Fatalf("list %v: %v; stale fragments left: %v", away, err, stale)
	}
	kinds := eventKinds(t, conn)
	if !strings.Contains(kinds, mgmt.EventDriveDown) || !strings.Contains(kinds, mgmt.EventDriveUp) ||
		strings.Contains(kinds, mgmt.EventDriveFailed) {
		t.Fatalf("events %q: want drive.down and drive.up, no drive.failed", kinds)
	}
	t.Logf("%d stripes before, %d written while away, %d moved back; %d stale generations waited for the drive",
		len(before), writtenAway, moved, len(wantStuck))
}

// TestDownPastGraceFails: a drive that stays unreachable past its pool's
// grace is declared failed and rebuilt; status shows the time left before.
func TestDownPastGraceFails(t *testing.T) {
	c, conn := startRebuildTest(t, Config{Drives: 12})
	ctx := context.Background()
	if err := conn.Mgmt.SetDownGrace(ctx, "default", 2*time.Second); err != nil {
		t.Fatal(err)
	}
	files := fillFiles(t, conn, 20, 8, 16<<10)
	if err := conn.Mgmt.DriveFault(ctx, storage.FaultArgs{Drive: 5, Op: "offline"}); err != nil {
		t.Fatal(err)
	}
	st, err := conn.Mgmt.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := st.Drives[5]; d.State != clustermap.StateDown || d.GraceLeft <= 0 || d.GraceLeft > 2 {
		t.Fatalf("status of the offline drive: %+v, want down with 0..2 s of grace left", d)
	}
	if st.Pools[0].DownGrace != 2 {
		t.Fatalf("pool down grace %v s, want 2", st.Pools[0].DownGrace)
	}
	deadline := time.Now().Add(30 * time.Second)
	for driveState(t, c, 5) != clustermap.StateFailed {
		if time.Now().After(deadline) {
			t.Fatalf("drive down for 30s with a grace of 2s is %s, want failed", driveState(t, c, 5))
		}
		time.Sleep(50 * time.Millisecond)
	}
	waitRecovered(t, c)
	verifyFiles(t, conn, files)
	checkBalance(t, c)
	kinds := eventKinds(t, conn)
	for _, k := range []string{mgmt.EventDriveDown, mgmt.EventDriveFailed, mgmt.EventRebuildStart, mgmt.EventRebuildDone} {
		if !strings.Contains(kinds, k) {
			t.Fatalf("events %q lack %s", kinds, k)
		}
	}
	// A failed drive that answers again stays failed: its data was rebuilt.
	if err := conn.Mgmt.DriveFault(ctx, storage.FaultArgs{Drive: 5, Op: "online"}); err != nil {
		t.Fatal(err)
	}
	if s := driveState(t, c, 5); s != clustermap.StateFailed {
		t.Fatalf("failed drive back online is %s", s)
	}
}

// TestClientCarriesOnWhileDriveDown: a client that keeps writing and
// reading never sees an error while a drive goes offline and comes back.
// The health loop is off: the client's own failed call reports the drive,
// which the management service probes and marks down.
func TestClientCarriesOnWhileDriveDown(t *testing.T) {
	cfg := Config{Drives: 12, Unit: 16 << 10, HealthInterval: time.Hour, RebuildInterval: time.Second, DriveSize: 256 << 20}
	c, conn := startTest(t, cfg)
	ctx := context.Background()
	if err := conn.Mgmt.SetDownGrace(ctx, "default", time.Minute); err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		files = map[string][]byte{}
		done  int
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			p := fmt.Sprintf("/live%03d", i)
			data := randBytes(t, 1+(i*7919)%(3*8*(16<<10)))
			put(t, conn, p, data) // fails the test on any error
			if got := get(t, conn, p); string(got) != string(data) {
				t.Errorf("%s: read back differs", p)
			}
			mu.Lock()
			files[p] = data
			done++
			mu.Unlock()
		}
	}()
	waitDone := func(n int) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			mu.Lock()
			d := done
			mu.Unlock()
			if d >= n || time.Now().After(deadline) {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitDone(5)
	if err := c.storage.Fault(storage.FaultArgs{Drive: 7, Op: "offline"}); err != nil {
		t.Fatal(err)
	}
	waitDone(15)
	if s := driveState(t, c, 7); s != clustermap.StateDown {
		t.Errorf("after the client's writes hit offline d07 it is %s, want down", s)
	}
	if err := c.storage.Fault(storage.FaultArgs{Drive: 7, Op: "online"}); err != nil {
		t.Fatal(err)
	}
	c.Mgmt.CheckDrives(ctx) // the detector pass that the health loop would run
	if s := driveState(t, c, 7); s != clustermap.StateUp {
		t.Errorf("d07 answering again is %s, want up", s)
	}
	waitDone(25)
	close(stop)
	wg.Wait()
	waitRecovered(t, c)
	mu.Lock()
	defer mu.Unlock()
	verifyFiles(t, conn, maps.Clone(files))
}
