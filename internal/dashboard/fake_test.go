package dashboard

import (
	"context"
	"sync"

	"poolfs/internal/clustermap"
	"poolfs/internal/meta"
	"poolfs/internal/mgmt"
	"poolfs/internal/placement"
)

// fakeCluster answers the dashboard's calls from a fixed status and
// records the actions asked of it (the HTTP tests check refusals: that
// nothing reached the cluster).
type fakeCluster struct {
	mu    sync.Mutex
	calls []string
}

var _ Cluster = (*fakeCluster)(nil)

func (f *fakeCluster) record(c string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, c)
}

func (f *fakeCluster) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *fakeCluster) StatusOf(ctx context.Context, rescan bool) (*mgmt.Status, error) {
	st := &mgmt.Status{Name: "test", Epoch: 3, Health: mgmt.HealthDegraded,
		Pools: []mgmt.PoolStatus{{ID: 0, Name: "default", Scheme: "4+2", Health: mgmt.HealthDegraded, Drives: 6, DrivesUp: 5,
			Capacity: clustermap.Capacity{Raw: 6 << 30, UsableRaw: 100 << 30}, UsedRaw: 40 << 30,
			Notes: []string{"drive d05 down: declared failed and rebuilt in 9m0s unless it answers"}}}}
	for i := range 6 {
		st.Drives = append(st.Drives, mgmt.DriveStatus{ID: placement.DriveID(i).String(), Server: "s0", State: clustermap.StateUp,
			Capacity: 1 << 30, Used: 1 << 28})
	}
	st.Drives[5].State, st.Drives[5].GraceLeft = clustermap.StateDown, 540
	return st, nil
}

func (f *fakeCluster) Map(ctx context.Context) (*clustermap.Map, error) {
	m := &clustermap.Map{Name: "test", Servers: []clustermap.Server{{ID: "s0"}},
		Pools: []clustermap.Pool{{ID: 0, Name: "default", K: 4, M: 2}}}
	for i := range 6 {
		m.Drives = append(m.Drives, clustermap.Drive{ID: placement.DriveID(i), Server: "s0", State: clustermap.StateUp})
		m.Pools[0].Drives = append(m.Pools[0].Drives, placement.DriveID(i))
	}
	return m, nil
}

func (f *fakeCluster) Events(ctx context.Context, after uint64, limit int) ([]meta.Event, error) {
	return []meta.Event{{Seq: 1, Kind: "drive.failed", Subject: "d01", Message: "failed by operator"},
		{Seq: 2, Kind: "rebuild.start", Subject: "pool/default"}}, nil
}

func (f *fakeCluster) DriveIO(ctx context.Context) ([]mgmt.DriveStatus, error) { return nil, nil }

func (f *fakeCluster) Scrub(ctx context.Context, op, pool string) (*mgmt.ScrubStatus, error) {
	if op != "status" {
		f.record("scrub " + op)
	}
	return &mgmt.ScrubStatus{}, nil
}

func (f *fakeCluster) FailDrive(ctx context.Context, id placement.DriveID) error {
	f.record("fail " + id.String())
	return nil
}

func (f *fakeCluster) ReplaceDrive(ctx context.Context, id placement.DriveID) (placement.DriveID, error) {
	f.record("replace " + id.String())
	return 9, nil
}

func (f *fakeCluster) AddDrive(ctx context.Context, pool string) (placement.DriveID, error) {
	f.record("add " + pool)
	return 9, nil
}

func (f *fakeCluster) SetRebuildPriority(ctx context.Context, pool, prio string) error {
	f.record("priority " + pool + " " + prio)
	return nil
}

func (f *fakeCluster) Striping(ctx context.Context, limit int) (*mgmt.StripingReport, error) {
	return &mgmt.StripingReport{Scanned: 3, Files: []mgmt.NarrowFile{{Ino: 7, Path: "/scratch/narrow.dat", Pool: "default",
		Stripes: 40, Width: 3, PoolWidth: 6, Drives: 6, Reason: "stripes of 3 fragments"}}}, nil
}
