package rebuild

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"poolfs/internal/clustermap"
	"poolfs/internal/meta"
	"poolfs/internal/mgmt/jobtest"
	"poolfs/internal/placement"
	"poolfs/internal/recovery"
	"poolfs/internal/storage"
)

// The coordinator's dependencies in memory: a map a test changes, stripe
// records with their PG index, storage servers that record the reconstruct
// tasks they are given, runs kept in a map, and the events recorded. The
// coordinator never touches fragments itself (the servers do), so no drive
// is needed.

type fakeMaps struct {
	mu sync.Mutex
	m  *clustermap.Map
}

func (f *fakeMaps) Map(context.Context) (*clustermap.Map, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.m.Clone(), nil
}

// update changes the map as a new epoch.
func (f *fakeMaps) update(t *testing.T, fn func(m *clustermap.Map)) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	m := f.m.Clone()
	fn(m)
	m.Epoch++
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	f.m = m
}

func (f *fakeMaps) setState(t *testing.T, st clustermap.DriveState, ids ...placement.DriveID) {
	t.Helper()
	f.update(t, func(m *clustermap.Map) {
		for i := range m.Drives {
			if slices.Contains(ids, m.Drives[i].ID) {
				m.Drives[i].State = st
			}
		}
	})
}

// fakeStore holds stripe records by inode and stripe; ListPG reads them
// by the PG the record names, in (inode, stripe) order, as the store's
// index does.
type fakeStore struct {
	mu       sync.Mutex
	pools    map[uint64]uint32 // inode → pool
	recs     map[[2]uint64]meta.StripeRec
	replaced int
	listErr  map[uint32]error // pool → ListPG's error
	conflict bool             // ReplaceStripeDrives loses every CAS
	gc       []meta.GCItem    // the GC queue
	gcErr    error            // GCList's error
}

func (f *fakeStore) GCList(_ context.Context, limit int) ([]meta.GCItem, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gcErr != nil {
		return nil, f.gcErr
	}
	return slices.Clone(f.gc), nil
}

func newFakeStore() *fakeStore {
	return &fakeStore{pools: map[uint64]uint32{}, recs: map[[2]uint64]meta.StripeRec{}, listErr: map[uint32]error{}}
}

func (f *fakeStore) put(pool uint32, ino uint64, r meta.StripeRec) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pools[ino] = pool
	f.recs[[2]uint64{ino, r.Stripe}] = r
}

func (f *fakeStore) remove(ino, stripe uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.recs, [2]uint64{ino, stripe})
}

func (f *fakeStore) rec(ino, stripe uint64) meta.StripeRec {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.recs[[2]uint64{ino, stripe}]
}

func (f *fakeStore) ListPG(_ context.Context, pool, pg uint32, after meta.StripeRef, limit int) ([]meta.StripeRef, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.listErr[pool]; err != nil {
		return nil, err
	}
	var out []meta.StripeRef
	for k, r := range f.recs {
		if f.pools[k[0]] != pool || r.PG != pg {
			continue
		}
		if k[0] < uint64(after.Ino) || k[0] == uint64(after.Ino) && k[1] <= after.Stripe {
			continue
		}
		out = append(out, meta.StripeRef{Ino: meta.Ino(k[0]), Stripe: k[1], Gen: r.Gen})
	}
	slices.SortFunc(out, func(a, b meta.StripeRef) int {
		if a.Ino != b.Ino {
			return int(a.Ino) - int(b.Ino)
		}
		return int(a.Stripe) - int(b.Stripe)
	})
	return out[:min(limit, len(out))], nil
}

func (f *fakeStore) Stripes(_ context.Context, ino meta.Ino, first, last uint64) ([]meta.StripeRec, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []meta.StripeRec
	for s := first; s <= last; s++ {
		if r, ok := f.recs[[2]uint64{uint64(ino), s}]; ok {
			r.Drives = slices.Clone(r.Drives)
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		return nil, meta.ErrNotFound
	}
	return out, nil
}

func (f *fakeStore) ReplaceStripeDrives(_ context.Context, ino meta.Ino, stripe, gen uint64, drives []uint32) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := [2]uint64{uint64(ino), stripe}
	r, ok := f.recs[k]
	if !ok || r.Gen != gen || f.conflict {
		return meta.ErrConflict
	}
	r.Drives = slices.Clone(drives)
	f.recs[k] = r
	f.replaced++
	return nil
}

// fakeServers records every reconstruct task; fail, if set, decides a
// task's error; block, if set, holds every task until it is closed or the
// task's context ends.
type fakeServers struct {
	mu    sync.Mutex
	args  []*storage.ReconstructArgs
	fail  func(a *storage.ReconstructArgs) error
	block chan struct{}
}

func (f *fakeServers) Server(m *clustermap.Map, id placement.DriveID) (Server, error) {
	if _, err := m.Drive(id); err != nil {
		return nil, err
	}
	return fakeServer{f}, nil
}

type fakeServer struct{ f *fakeServers }

func (s fakeServer) Reconstruct(ctx context.Context, a *storage.ReconstructArgs) (*storage.ReconstructResult, error) {
	f := s.f
	if f.block != nil {
		select {
		case <-f.block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	f.mu.Lock()
	f.args = append(f.args, a)
	fail := f.fail
	f.mu.Unlock()
	if fail != nil {
		if err := fail(a); err != nil {
			return nil, err
		}
	}
	return &storage.ReconstructResult{}, nil
}

func (f *fakeServers) tasks() []*storage.ReconstructArgs {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.args)
}

type event struct {
	kind, subject, msg string
	dur                time.Duration
}

// fakeEvents records events; Lost names inode i "/f<i>" and records each
// call's stripes.
type fakeEvents struct {
	mu   sync.Mutex
	evs  []event
	lost []map[uint64][]uint64
}

func (f *fakeEvents) Event(_ context.Context, kind, subject, msg string, dur time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.evs = append(f.evs, event{kind, subject, msg, dur})
}

func (f *fakeEvents) Lost(_ context.Context, lost map[uint64][]uint64) []recovery.LostFile {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lost = append(f.lost, lost)
	var out []recovery.LostFile
	for ino, ss := range lost {
		out = append(out, recovery.LostFile{Ino: ino, Path: fmt.Sprintf("/f%d", ino), Stripes: slices.Sorted(slices.Values(ss))})
	}
	slices.SortFunc(out, func(a, b recovery.LostFile) int { return int(a.Ino) - int(b.Ino) })
	return out
}

// kinds returns the kinds of the events recorded so far.
func (f *fakeEvents) kinds() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, e := range f.evs {
		out = append(out, e.kind)
	}
	return out
}

func (f *fakeEvents) all() []event {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.evs)
}

func (f *fakeEvents) lostCalls() []map[uint64][]uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.lost)
}

// rig is a coordinator over one 2+1 pool (ID 3, "p") of six drives on six
// servers, with one stripe per PG for the first n PGs (inode 100+i,
// stripe 0, on its PG's set), and its fakes.
type rig struct {
	maps    *fakeMaps
	store   *fakeStore
	servers *fakeServers
	runs    *jobtest.Runs[Record]
	events  *fakeEvents
	c       *Coordinator
	n       int
}

const rigPool = 3

func newRig(t *testing.T, n int) *rig {
	t.Helper()
	m := &clustermap.Map{Name: "t", Epoch: 1}
	var ids []placement.DriveID
	for i := range 6 {
		id := placement.DriveID(i)
		ids = append(ids, id)
		srv := fmt.Sprintf("s%d", i)
		m.Servers = append(m.Servers, clustermap.Server{ID: srv, Addr: "x"})
		m.Drives = append(m.Drives, clustermap.Drive{ID: id, Server: srv, State: clustermap.StateUp, Capacity: 1 << 30, Pool: rigPool})
	}
	m.Pools = []clustermap.Pool{{ID: rigPool, Name: "p", K: 2, M: 1, Unit: 1 << 16, Drives: ids,
		PGs: placement.DefaultPGs(6, 3), Layout: placement.Declustered}}
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	r := &rig{maps: &fakeMaps{m: m}, store: newFakeStore(), servers: &fakeServers{},
		runs: jobtest.NewRuns[Record](), events: &fakeEvents{}, n: n}
	pp, err := m.Placement(rigPool)
	if err != nil {
		t.Fatal(err)
	}
	pm, err := pp.Map()
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		var drives []uint32
		for _, d := range pm.Sets[i][:3] {
			drives = append(drives, uint32(d))
		}
		r.store.put(rigPool, uint64(100+i), meta.StripeRec{Stripe: 0, Gen: 1, PG: uint32(i), Len: 8192, ShardSize: 4096, Drives: drives, K: 2})
	}
	r.c = New(Deps{Maps: r.maps, Store: r.store, Servers: r.servers, Runs: r.runs, Events: r.events})
	return r
}

// on returns the inodes of the rig's stripes with a fragment on drive id.
func (r *rig) on(id placement.DriveID) []uint64 {
	var out []uint64
	for i := range r.n {
		if slices.Contains(r.store.rec(uint64(100+i), 0).Drives, uint32(id)) {
			out = append(out, uint64(100+i))
		}
	}
	return out
}

// pass runs one pass and fails the test on an error.
func (r *rig) pass(t *testing.T) bool {
	t.Helper()
	again, err := r.c.Pass(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return again
}

var errDown = errors.New("server down")
