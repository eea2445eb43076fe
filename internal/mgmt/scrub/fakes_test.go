package scrub

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"poolfs/internal/chunkstore"
	"poolfs/internal/chunkstore/drivetest"
	"poolfs/internal/clustermap"
	"poolfs/internal/erasure"
	"poolfs/internal/meta"
	"poolfs/internal/mgmt/jobtest"
	"poolfs/internal/placement"
	"poolfs/internal/recovery"
	"poolfs/internal/stripeio"
)

// The scheduler's dependencies in memory: drivetest drives holding real
// sealed fragments, a map a test changes, the scan and the stripe records
// of a fixed set of stripes, runs kept in a map, and the events recorded.

type fakeStripes struct {
	mu   sync.Mutex
	recs map[[2]uint64]meta.StripeRec
}

func (f *fakeStripes) Stripes(_ context.Context, ino meta.Ino, first, last uint64) ([]meta.StripeRec, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []meta.StripeRec
	for s := first; s <= last; s++ {
		if r, ok := f.recs[[2]uint64{uint64(ino), s}]; ok {
			out = append(out, r)
		}
	}
	return out, nil
}

func (f *fakeStripes) set(ino, stripe uint64, r meta.StripeRec) {
	f.mu.Lock()
	f.recs[[2]uint64{ino, stripe}] = r
	f.mu.Unlock()
}

// fakeScanner returns the stripes of the rig, in PG order.
type fakeScanner struct {
	stripes []recovery.Stripe
	recs    []meta.StripeRec
}

func (f *fakeScanner) Scan(context.Context, *clustermap.Pool) ([]recovery.Stripe, []meta.StripeRec, error) {
	return slices.Clone(f.stripes), slices.Clone(f.recs), nil
}

type fakeEvents struct {
	mu      sync.Mutex
	started []string
	done    []Status
	lost    []map[uint64][]uint64
}

func (f *fakeEvents) Started(_ context.Context, pool, msg string) {
	f.mu.Lock()
	f.started = append(f.started, pool+": "+msg)
	f.mu.Unlock()
}

func (f *fakeEvents) Done(_ context.Context, _ string, st Status) {
	f.mu.Lock()
	f.done = append(f.done, st)
	f.mu.Unlock()
}

func (f *fakeEvents) Lost(_ context.Context, lost map[uint64][]uint64) []recovery.LostFile {
	f.mu.Lock()
	f.lost = append(f.lost, lost)
	f.mu.Unlock()
	var files []recovery.LostFile
	for ino, ss := range lost {
		files = append(files, recovery.LostFile{Ino: ino, Path: fmt.Sprintf("/f%d", ino), Stripes: slices.Sorted(slices.Values(ss))})
	}
	slices.SortFunc(files, func(a, b recovery.LostFile) int { return int(a.Ino) - int(b.Ino) })
	return files
}

func (f *fakeEvents) dones() []Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.done)
}

const (
	testK, testM = 2, 2
	shardSize    = 4096
)

// rig is a scheduler over a pool of 6 drivetest drives, 2+2, whose
// stripes are written by add.
type rig struct {
	s       *Scheduler
	drives  drivetest.Drives
	maps    *drivetest.Maps
	scan    *fakeScanner
	stripes *fakeStripes
	runs    *jobtest.Runs[Record]
	events  *fakeEvents
	hold    *holdDrives            // the scheduler's view of drives
	shards  map[[2]uint64][][]byte // the shards each stripe was written with
}

func newRig(t *testing.T) *rig {
	t.Helper()
	m := drivetest.Map(6, testK, testM, shardSize, 1<<30)
	r := &rig{
		drives:  drivetest.DrivesOf(m),
		maps:    drivetest.NewMaps(m),
		scan:    &fakeScanner{},
		stripes: &fakeStripes{recs: map[[2]uint64]meta.StripeRec{}},
		runs:    jobtest.NewRuns[Record](),
		events:  &fakeEvents{},
		shards:  map[[2]uint64][][]byte{},
	}
	r.hold = newHoldDrives(r.drives)
	r.s = r.scheduler(r.hold)
	return r
}

// scheduler returns a new scheduler over the rig's fakes reaching drives
// through ds (as the service that leads next would).
func (r *rig) scheduler(ds stripeio.MapDrives) *Scheduler {
	return New(Deps{Maps: r.maps, Scanner: r.scan, Stripes: r.stripes, Drives: ds, Runs: r.runs, Events: r.events})
}

// holdDrives records which inodes' fragments are read, and makes reads
// of the inodes in hold wait until their context ends (a drive that does
// not answer while a pass is halted or stopped).
type holdDrives struct {
	inner drivetest.Drives
	mu    sync.Mutex
	hold  map[uint64]bool
	read  map[uint64]int
}

func newHoldDrives(ds drivetest.Drives) *holdDrives {
	return &holdDrives{inner: ds, hold: map[uint64]bool{}, read: map[uint64]int{}}
}

func (h *holdDrives) Drive(m *clustermap.Map, id placement.DriveID) (chunkstore.Drive, error) {
	d, err := h.inner.Drive(m, id)
	if err != nil {
		return nil, err
	}
	return holdDrive{Drive: d, h: h}, nil
}

func (h *holdDrives) reads(ino uint64) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.read[ino]
}

type holdDrive struct {
	chunkstore.Drive
	h *holdDrives
}

func (d holdDrive) ReadFragment(ctx context.Context, key erasure.FragmentKey, off, n int64, dst []byte) ([]byte, error) {
	d.h.mu.Lock()
	d.h.read[key.Ino]++
	hold := d.h.hold[key.Ino]
	d.h.mu.Unlock()
	if hold {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return d.Drive.ReadFragment(ctx, key, off, n, dst)
}

// add writes stripe 0 of inode ino, generation 1, in placement group pg,
// on drives (its data the inode's number repeated), sealed as the client
// seals it, and records it as committed.
func (r *rig) add(t *testing.T, ino uint64, pg uint32, drives ...uint32) {
	t.Helper()
	cd, err := erasure.NewCodec(testK, testM)
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte{byte(ino), byte(ino >> 8), 0x5a}, testK*shardSize/3+1)[:testK*shardSize]
	shards := make([][]byte, testK+testM)
	cd.Split(data, shardSize, shards)
	if err := cd.Encode(shards); err != nil {
		t.Fatal(err)
	}
	rec := meta.StripeRec{Stripe: 0, Gen: 1, PG: pg, Len: uint32(len(data)), ShardSize: shardSize, Drives: drives, K: testK}
	r.write(t, ino, rec, shards, 0, 1, 2, 3)
	r.shards[[2]uint64{ino, 0}] = shards
	ids := make([]placement.DriveID, len(drives))
	for i, id := range drives {
		ids[i] = placement.DriveID(id)
	}
	r.scan.stripes = append(r.scan.stripes, recovery.Stripe{Ino: ino, Stripe: 0, Gen: 1, PG: pg, Drives: ids, K: testK})
	r.scan.recs = append(r.scan.recs, rec)
	r.stripes.set(ino, 0, rec)
}

// write seals shards[i] of the stripe rec names for each index and writes
// it to its drive.
func (r *rig) write(t *testing.T, ino uint64, rec meta.StripeRec, shards [][]byte, idx ...int) {
	t.Helper()
	fs := r.stripe(ino, rec)
	var targets []stripeio.Loc
	var frags [][]byte
	for _, i := range idx {
		targets = append(targets, stripeio.Loc{Index: i, Drive: placement.DriveID(rec.Drives[i])})
		frags = append(frags, stripeio.NewFragment(fs, shards[i]))
	}
	m, _ := r.maps.Map(context.Background())
	for _, err := range stripeio.WriteFragments(context.Background(), stripeio.OnMap(r.drives, m), fs, targets, frags) {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func (r *rig) stripe(ino uint64, rec meta.StripeRec) *stripeio.Stripe {
	return &stripeio.Stripe{Ino: ino, Stripe: rec.Stripe, Gen: rec.Gen, K: testK, M: testM, Pool: 0, Len: rec.Len, ShardSize: shardSize}
}

// key is the key of fragment i of stripe 0 of ino, generation 1.
func key(ino uint64, i int) erasure.FragmentKey {
	return erasure.FragmentKey{Ino: ino, Stripe: 0, Gen: 1, Index: uint8(i)}
}

// checkIntact reads every fragment of ino's stripe from its drive and
// compares its shard byte for byte with what was written.
func (r *rig) checkIntact(t *testing.T, ino uint64) {
	t.Helper()
	rec := r.scan.recs[slices.IndexFunc(r.scan.stripes, func(s recovery.Stripe) bool { return s.Ino == ino })]
	fs := r.stripe(ino, rec)
	for i, id := range rec.Drives {
		got, err := stripeio.ReadFragment(context.Background(), r.drives[placement.DriveID(id)], placement.DriveID(id), fs, i, nil)
		if err != nil {
			t.Errorf("inode %d fragment %d: %v", ino, i, err)
			continue
		}
		if !bytes.Equal(got, r.shards[[2]uint64{ino, 0}][i]) {
			t.Errorf("inode %d fragment %d differs from what was written", ino, i)
		}
	}
}

// wait waits for the running pass to end and returns its status.
func (r *rig) wait(t *testing.T) Status {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		st := r.s.Status()
		if !st.Active {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pass did not end: %+v", st)
		}
	}
}
