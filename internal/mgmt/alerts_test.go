package mgmt

import (
	"testing"
	"time"

	"poolfs/internal/alerts"
	"poolfs/internal/chunkstore"
	"poolfs/internal/clustermap"
	"poolfs/internal/placement"
)

// TestClockWatch checks the skew read from a storage server's reply: its
// clock against the midpoint of the probe, per server; a reply without a
// time (an older server) gives no reading.
func TestClockWatch(t *testing.T) {
	m := &clustermap.Map{Drives: []clustermap.Drive{{ID: 0, Server: "s0"}, {ID: 1, Server: "s1"}, {ID: 2, Server: "s2"}}}
	var c clockWatch
	start := time.Now()
	end := start.Add(40 * time.Millisecond)
	mid := start.Add(20 * time.Millisecond)
	c.record(m, placement.DriveID(0), chunkstore.Usage{ServerTime: mid.Add(3 * time.Second).UnixNano()}, start, end)
	c.record(m, placement.DriveID(1), chunkstore.Usage{ServerTime: mid.Add(-250 * time.Millisecond).UnixNano()}, start, end)
	c.record(m, placement.DriveID(2), chunkstore.Usage{}, start, end)
	c.recordSent("mount h1:/mnt", end.Add(-2*time.Minute).UnixNano(), end)
	c.recordSent("mount h2:/mnt", 0, end)
	got := c.readings()
	want := []alerts.Clock{{Subject: "mount h1:/mnt", Skew: -2 * time.Minute}, {Subject: "server s0", Skew: 3 * time.Second},
		{Subject: "server s1", Skew: -250 * time.Millisecond}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("readings %+v, want %+v", got, want)
	}
}

// TestAlertState checks what the rules are given from a status: pool
// usage and recovery, drive states with their down time, servers.
func TestAlertState(t *testing.T) {
	down := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	st := &Status{
		Pools: []PoolStatus{{ID: 3, Name: "p", Capacity: clustermap.Capacity{Raw: 1100, UsableRaw: 1000}, UsedRaw: 900, PreservationReserved: 200}},
		Drives: []DriveStatus{{ID: "d00", Server: "s0", State: clustermap.StateDown, DownSince: down.UnixNano()},
			{ID: "d01", Server: "s1", State: clustermap.StateUp, Slow: "slow"}},
		Hosts: []HostSpace{{Server: "s0", Drives: 1, Free: 10, Promised: 20}, {Server: "s1", Drives: 1, Free: 20, Promised: 10}},
		Rebuild: RebuildStatus{Pools: []RebuildStatus{{Pool: 3, Active: true, Kind: "rebuild", BytesDone: 77, Incomplete: "too few drives",
			Blocked: 2, LostStripes: 4, Lost: []LostFile{{Ino: 1}, {Ino: 2}}}}},
	}
	s := &Service{}
	got := s.alertState(st, down.Add(time.Hour))
	wantPool := alerts.Pool{Name: "p", UsableRaw: 1000, UsedRaw: 900, RebuildActive: true, RebuildKind: "rebuild", RebuildDone: 77,
		Incomplete: "too few drives", Blocked: 2, LostStripes: 4, LostFiles: 2, Preservation: 200, PreservationLeft: 100}
	if len(got.Pools) != 1 || got.Pools[0] != wantPool {
		t.Fatalf("pools %+v, want %+v", got.Pools, wantPool)
	}
	if len(got.Drives) != 2 || got.Drives[0].State != "down" || !got.Drives[0].DownSince.Equal(down) || got.Drives[1].Slow != "slow" {
		t.Fatalf("drives %+v", got.Drives)
	}
	if len(got.HostsShort) != 1 || got.HostsShort[0].Server != "s0" || got.HostsShort[0].Message != st.Hosts[0].Note() {
		t.Fatalf("hosts short %+v", got.HostsShort)
	}
	if len(got.Servers) != 2 || got.Servers[0] != "s0" || got.Servers[1] != "s1" || !got.Now.Equal(down.Add(time.Hour)) {
		t.Fatalf("servers %v, now %v", got.Servers, got.Now)
	}
}
