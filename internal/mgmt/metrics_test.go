package mgmt

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"poolfs/internal/clustermap"
)

// series collects what fn sends as "name{l=v,...}" → value.
func series(t *testing.T, fn func(ch chan<- prometheus.Metric)) map[string]float64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 1000)
	fn(ch)
	close(ch)
	out := map[string]float64{}
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			t.Fatal(err)
		}
		name := m.Desc().String()
		name = name[strings.Index(name, `"`)+1:]
		name = name[:strings.Index(name, `"`)]
		var ls []string
		for _, l := range d.GetLabel() {
			ls = append(ls, l.GetName()+"="+l.GetValue())
		}
		v := d.GetGauge().GetValue()
		if d.GetCounter() != nil {
			v = d.GetCounter().GetValue()
		}
		out[name+"{"+strings.Join(ls, ",")+"}"] = v
	}
	return out
}

// TestCollectStatus: the series the alerting rules and the dashboard rely
// on, from a status with a failed drive, a down drive and lost data.
func TestCollectStatus(t *testing.T) {
	st := &Status{Epoch: 9,
		Pools: []PoolStatus{{ID: 0, Name: "p", Health: HealthDataLoss, UsedRaw: 90, Reclaimable: 5,
			Capacity: clustermap.Capacity{Raw: 200, UsableRaw: 100}}},
		Drives: []DriveStatus{
			{ID: "d00", Server: "s0", State: clustermap.StateUp, Capacity: 10, Used: 4},
			{ID: "d01", Server: "s0", State: clustermap.StateFailed, Capacity: 10},
			{ID: "d02", Server: "s1", State: clustermap.StateDown, Error: "not answering", DownSince: 1, GraceLeft: 42},
		},
		Rebuild: RebuildStatus{Pools: []RebuildStatus{{Pool: 0, PoolName: "p", Active: true, Kind: "rebuild",
			Bytes: 1000, BytesDone: 250, LostStripes: 3, Incomplete: "too few drives"}}},
	}
	got := series(t, func(ch chan<- prometheus.Metric) { collectStatus(ch, st) })
	for k, want := range map[string]float64{
		"poolfs_map_epoch{}":                                          9,
		"poolfs_pool_health{health=data_loss,pool=p}":                 1,
		"poolfs_pool_health{health=healthy,pool=p}":                   0,
		"poolfs_pool_used_raw_bytes{pool=p}":                          90,
		"poolfs_pool_usable_raw_bytes{pool=p}":                        100,
		"poolfs_pool_reclaimable_bytes{pool=p}":                       5,
		"poolfs_drive_state{drive=d01,pool=p,server=s0,state=failed}": 1,
		"poolfs_drive_state{drive=d01,pool=p,server=s0,state=up}":     0,
		"poolfs_drive_state{drive=d02,pool=p,server=s1,state=down}":   1,
		"poolfs_drive_answering{drive=d00,pool=p,server=s0}":          1,
		"poolfs_drive_answering{drive=d01,pool=p,server=s0}":          0,
		"poolfs_drive_answering{drive=d02,pool=p,server=s1}":          0,
		"poolfs_drive_down_grace_seconds{drive=d02,pool=p,server=s1}": 42,
		"poolfs_pool_drives{pool=p,state=failed}":                     1,
		"poolfs_pool_drives{pool=p,state=up}":                         1,
		"poolfs_rebuild_active{kind=rebuild,pool=p}":                  1,
		"poolfs_rebuild_done_bytes{pool=p}":                           250,
		"poolfs_rebuild_incomplete{pool=p}":                           1,
		"poolfs_pool_lost_stripes{pool=p}":                            3,
	} {
		if v, ok := got[k]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", k, v, ok, want)
		}
	}
	if _, ok := got["poolfs_drive_down_grace_seconds{drive=d00,pool=p,server=s0}"]; ok {
		t.Error("an up drive has a grace countdown")
	}
}

// TestStandbyExportsOnlyLeader: a standby management service exports
// poolfs_mgmt_leader 0 and no cluster series (its map may be stale); the
// leader exports poolfs_mgmt_leader 1 beside them.
func TestStandbyExportsOnlyLeader(t *testing.T) {
	svc := New(newTestStore(t), nil, nil, nil)
	if _, err := svc.Update(context.Background(), func(m *clustermap.Map) error { m.Name = "x"; return nil }); err != nil {
		t.Fatal(err)
	}
	if got := series(t, svc.Collector().Collect); got["poolfs_mgmt_leader{}"] != 1 || len(got) < 2 {
		t.Fatalf("leader exports %v", got)
	}
	svc.Follow("10.0.0.1:9401")
	if got := series(t, svc.Collector().Collect); len(got) != 1 || got["poolfs_mgmt_leader{}"] != 0 {
		t.Fatalf("standby exports %v, want only poolfs_mgmt_leader 0", got)
	}
}
