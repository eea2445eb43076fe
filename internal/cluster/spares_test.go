package cluster

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"poolfs/internal/mgmt"
	"poolfs/internal/placement"
)

// TestGroupedSparesStick: in the grouped layout a hot spare that a failed
// drive was rebuilt onto keeps its place when a drive of another group
// fails later, through the map service, the coordinator and the clients.
func TestGroupedSparesStick(t *testing.T) {
	// 8+2 grouped, 22 drives: groups d00-d09 and d10-d19, spares d20, d21.
	c, conn := startRebuildTest(t, Config{Drives: 22, Layout: "grouped", Preservation: 2})
	ctx := context.Background()
	files := fillFiles(t, conn, 24, 8, 16<<10)
	if err := conn.Mgmt.FailDrive(ctx, 14); err != nil {
		t.Fatal(err)
	}
	waitRecovered(t, c)
	onSpare := map[stripeKey][]placement.DriveID{}
	for k, s := range scanStripes(t, c) {
		if slices.Contains(s.Drives, 20) {
			onSpare[k] = s.Drives
		}
	}
	if len(onSpare) == 0 {
		t.Fatal("nothing was rebuilt onto spare d20")
	}
	// A failure in the lower group: it must take d21, not d20.
	if err := conn.Mgmt.FailDrive(ctx, 3); err != nil {
		t.Fatal(err)
	}
	waitRecovered(t, c)
	m, _ := c.Mgmt.Map(ctx)
	if want := map[placement.DriveID]placement.DriveID{14: 20, 3: 21}; !maps.Equal(m.Pools[0].HotSpareFor, want) {
		t.Fatalf("hot spares %v, want %v", m.Pools[0].HotSpareFor, want)
	}
	after := scanStripes(t, c)
	for k, was := range onSpare {
		if !slices.Equal(after[k].Drives, was) {
			t.Fatalf("stripe %v on spare d20 moved: %v -> %v", k, was, after[k].Drives)
		}
	}
	verifyFiles(t, conn, files)
	// A third failure finds no free spare: its group stays degraded and
	// readable, and group 1 keeps its spare.
	if err := conn.Mgmt.FailDrive(ctx, 5); err != nil {
		t.Fatal(err)
	}
	waitPass(t, c, func(st mgmt.RebuildStatus) bool { return st.Blocked > 0 })
	after = scanStripes(t, c)
	for k, was := range onSpare {
		if s := after[k]; !slices.Equal(s.Drives, was) {
			t.Fatalf("after a third failure, stripe %v on spare d20 moved: %v -> %v", k, was, s.Drives)
		}
	}
	verifyFiles(t, conn, files)
}

// waitRecovered is waitHealthy that trusts the coordinator's status (a scan
// of every PG costs seconds under -race with thousands of PGs): its last
// pass was at the current epoch, found nothing to do, and counted no stripe
// that is not healthy.
func waitRecovered(t *testing.T, c *Cluster) {
	t.Helper()
	waitPass(t, c, func(st mgmt.RebuildStatus) bool {
		return st.Degraded+st.Critical+st.Misplaced+st.Unavailable+st.Blocked == 0
	})
}

// waitPass waits until the coordinator is idle after a pass at the current
// map epoch whose status satisfies ok.
func waitPass(t *testing.T, c *Cluster, ok func(mgmt.RebuildStatus) bool) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		m, err := c.Mgmt.Map(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		st := c.Mgmt.Rebuild()
		if st.Epoch == m.Epoch && !st.Active && ok(st) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("coordinator not done after 90s: %+v", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
