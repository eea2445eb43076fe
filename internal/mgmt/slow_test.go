package mgmt

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"poolfs/internal/chunkstore"
	"poolfs/internal/chunkstore/drivetest"
	"poolfs/internal/clustermap"
	"poolfs/internal/erasure"
	"poolfs/internal/meta"
	"poolfs/internal/meta/sqlite"
	"poolfs/internal/placement"
)

// newTestStore opens a metadata store on a new SQLite database, closed
// when the test ends.
func newTestStore(t *testing.T) *meta.Store {
	t.Helper()
	eng, err := sqlite.Open(filepath.Join(t.TempDir(), "meta.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return meta.New(eng, meta.Options{})
}

// newTestService starts a management service on a SQLite store with n
// up in-memory drives of 1 GiB that answer at once, each holding one
// fragment.
func newTestService(t *testing.T, n int) (*Service, drivetest.Drives) {
	t.Helper()
	ctx := context.Background()
	drives := drivetest.Drives{}
	for i := range n {
		id := placement.DriveID(i)
		drives[id] = drivetest.NewWithCapacity(id.String(), 1<<30)
		drives[id].Put(erasure.FragmentKey{Ino: 1, Index: uint8(i)}, make([]byte, chunkstore.Align))
	}
	s := New(newTestStore(t), drives, nil, nil)
	if _, err := s.Update(ctx, func(m *clustermap.Map) error {
		for i := range n {
			m.Drives = append(m.Drives, clustermap.Drive{ID: placement.DriveID(i), State: clustermap.StateUp, Capacity: 1 << 30})
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return s, drives
}

// TestStatusWhileDriveHangs: status returns while one drive does not
// answer at all, reporting it as not answering and the others as usual.
func TestStatusWhileDriveHangs(t *testing.T) {
	s, drives := newTestService(t, 4)
	t.Cleanup(drives[2].Hold(drivetest.OpStat))
	done := make(chan *Status, 1)
	go func() {
		st, err := s.Status(context.Background())
		if err != nil {
			t.Error(err)
		}
		done <- st
	}()
	var st *Status
	select {
	case st = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("status is still waiting for the hung drive after 20s")
	}
	if st == nil {
		return
	}
	for i, d := range st.Drives {
		switch {
		case i == 2 && d.Error != "not answering":
			t.Fatalf("hung drive: error %q, want \"not answering\"", d.Error)
		case i != 2 && (d.Error != "" || d.Fragments != 1):
			t.Fatalf("drive %s: error %q, %d fragments; want its usage", d.ID, d.Error, d.Fragments)
		}
	}
}

// events returns the kinds of the events logged so far, in order.
func events(t *testing.T, s *Service) []string {
	t.Helper()
	evs, err := s.store.Events(context.Background(), 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range evs {
		kinds = append(kinds, e.Kind+" "+e.Subject)
	}
	return kinds
}

func driveState(t *testing.T, s *Service, id placement.DriveID) (clustermap.DriveState, string) {
	t.Helper()
	st, err := s.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st.Drives[id].State, st.Drives[id].Slow
}

// TestSlowDriveFlaggedAndCleared: a drive whose probes stay far slower
// than its peers' is flagged (status, event drive.slow) and cleared
// (drive.slow-cleared) when it is fast again; one that stays slower than
// DownAfter is marked down and comes back up only once it is fast again.
func TestSlowDriveFlaggedAndCleared(t *testing.T) {
	ctx := context.Background()
	s, drives := newTestService(t, 6)
	p := SlowPolicy{Floor: 20 * time.Millisecond, Factor: 10, Probes: 2, DownAfter: 400 * time.Millisecond}
	if err := s.SetSlowPolicy(p); err != nil {
		t.Fatal(err)
	}
	pass := func(n int) {
		for range n {
			s.CheckDrives(ctx)
		}
	}
	pass(2)
	drives[3].SlowDown(100 * time.Millisecond) // slow, but not past DownAfter
	pass(2)
	if st, slow := driveState(t, s, 3); st != clustermap.StateUp || slow == "" {
		t.Fatalf("after 2 slow probes: drive state %s, slow %q; want up and flagged", st, slow)
	}
	if ev := strings.Join(events(t, s), ", "); ev != EventDriveSlow+" d03" {
		t.Fatalf("events %q, want %s d03", ev, EventDriveSlow)
	}
	drives[3].SlowDown(0)
	pass(2)
	if st, slow := driveState(t, s, 3); st != clustermap.StateUp || slow != "" {
		t.Fatalf("after 2 normal probes: drive state %s, slow %q; want up, not flagged", st, slow)
	}
	if ev := strings.Join(events(t, s), ", "); ev != EventDriveSlow+" d03, "+EventDriveSlowCleared+" d03" {
		t.Fatalf("events %q", ev)
	}

	// Past DownAfter: down, and not back up while still slow.
	drives[3].SlowDown(time.Hour)
	pass(4)
	if st, slow := driveState(t, s, 3); st != clustermap.StateDown || slow == "" {
		t.Fatalf("after 4 probes past DownAfter: drive state %s, slow %q; want down and flagged", st, slow)
	}
	drives[3].SlowDown(0)
	pass(2)
	if st, slow := driveState(t, s, 3); st != clustermap.StateUp || slow != "" {
		t.Fatalf("fast again: drive state %s, slow %q; want up", st, slow)
	}
	want := []string{"drive.slow d03", "drive.slow-cleared d03", "drive.slow d03", "drive.down d03", "drive.slow-cleared d03", "drive.up d03"}
	if ev := strings.Join(events(t, s), ", "); ev != strings.Join(want, ", ") {
		t.Fatalf("events %q, want %q", ev, strings.Join(want, ", "))
	}
}

// TestSlowDrivesKeptForWidth: drives slower than DownAfter go down only
// while their pool keeps at least a stripe's width of up drives; the
// next one stays up (flagged, with an event saying why), so writes carry
// on at full width, slowly, rather than fail.
func TestSlowDrivesKeptForWidth(t *testing.T) {
	ctx := context.Background()
	s, drives := newTestService(t, 6)
	if _, err := s.Update(ctx, func(m *clustermap.Map) error {
		p := clustermap.Pool{ID: 0, Name: "p", K: 2, M: 2}
		for i := range m.Drives {
			m.Drives[i].Pool = 0
			p.Drives = append(p.Drives, m.Drives[i].ID)
		}
		m.Pools = []clustermap.Pool{p}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetSlowPolicy(SlowPolicy{Floor: 20 * time.Millisecond, Factor: 10, Probes: 2, DownAfter: 300 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	s.CheckDrives(ctx)
	for _, id := range []placement.DriveID{1, 3, 5} {
		drives[id].SlowDown(time.Hour)
	}
	for range 5 {
		s.CheckDrives(ctx)
	}
	down, flagged := 0, 0
	for _, id := range []placement.DriveID{1, 3, 5} {
		st, slow := driveState(t, s, id)
		if st == clustermap.StateDown {
			down++
		}
		if slow != "" {
			flagged++
		}
	}
	if down != 2 || flagged != 3 {
		t.Fatalf("%d of the 3 slow drives down, %d flagged; want 2 down (6 drives, 2+2 stripes) and 3 flagged", down, flagged)
	}
	kept := 0
	for _, ev := range events(t, s) {
		if strings.HasPrefix(ev, EventDriveSlow+" ") {
			kept++
		}
	}
	if kept != 4 { // three flagged, one kept up (said once)
		t.Fatalf("events %q: want drive.slow for each of the 3 drives and once more for the one kept up", events(t, s))
	}
}
