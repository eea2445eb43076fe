package gc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"poolfs/internal/clustermap"
	"poolfs/internal/erasure"
	"poolfs/internal/meta"
	"poolfs/internal/placement"
)

// The collector's dependencies in memory: a store with a GC queue, the
// committed generations and a namespace; drives that keep fragment keys
// with their mtimes; a fixed map; a guard a test sets. Every Sync and
// delete is logged in order on one shared log.

type eventLog struct {
	mu sync.Mutex
	l  []string
}

func (e *eventLog) add(s string) { e.mu.Lock(); e.l = append(e.l, s); e.mu.Unlock() }

func (e *eventLog) events() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.l)
}

type genKey struct {
	ino         meta.Ino
	stripe, gen uint64
}

type fakeStore struct {
	log       *eventLog
	mu        sync.Mutex
	queue     []meta.GCItem
	committed map[genKey]bool
	records   map[meta.Ino][]meta.StripeRec // committed stripe records
	dirs      map[meta.Ino][]meta.Dirent    // sorted by name
	attrs     map[meta.Ino]meta.Attr
	lists     int // GCList calls
}

func newFakeStore(log *eventLog) *fakeStore {
	return &fakeStore{log: log, committed: map[genKey]bool{}, dirs: map[meta.Ino][]meta.Dirent{}, attrs: map[meta.Ino]meta.Attr{}}
}

func (s *fakeStore) GCList(_ context.Context, limit int) ([]meta.GCItem, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lists++
	return slices.Clone(s.queue[:min(limit, len(s.queue))]), nil
}

func (s *fakeStore) GCDone(_ context.Context, seqs []uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = slices.DeleteFunc(s.queue, func(it meta.GCItem) bool { return slices.Contains(seqs, it.Seq) })
	return nil
}

func (s *fakeStore) queued() []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var seqs []uint64
	for _, it := range s.queue {
		seqs = append(seqs, it.Seq)
	}
	return seqs
}

func (s *fakeStore) Sync(context.Context) error { s.log.add("sync store"); return nil }

func (s *fakeStore) Committed(_ context.Context, ino meta.Ino, stripe, gen uint64) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.committed[genKey{ino, stripe, gen}], nil
}

func (s *fakeStore) StripeHeads(_ context.Context, ino meta.Ino, first, last uint64) ([]meta.StripeRec, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.records[ino] == nil {
		return nil, meta.ErrNotFound // as for a removed file
	}
	var out []meta.StripeRec
	for _, r := range s.records[ino] {
		if r.Stripe >= first && r.Stripe <= last {
			out = append(out, r)
		}
	}
	return out, nil
}

func (s *fakeStore) Readdir(_ context.Context, ino meta.Ino, after string, limit int) ([]meta.Dirent, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []meta.Dirent
	for _, e := range s.dirs[ino] {
		if e.Name > after && len(out) < limit {
			out = append(out, e)
		}
	}
	return out, nil
}

func (s *fakeStore) Getattr(_ context.Context, ino meta.Ino) (meta.Attr, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.attrs[ino]
	if !ok {
		return meta.Attr{}, meta.ErrNotFound
	}
	return a, nil
}

func (s *fakeStore) Unlink(_ context.Context, parent meta.Ino, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.dirs[parent])
	s.dirs[parent] = slices.DeleteFunc(s.dirs[parent], func(e meta.Dirent) bool { return e.Name == name })
	if len(s.dirs[parent]) == n {
		return meta.ErrNotFound
	}
	return nil
}

// add puts a file or directory named name in dir, changed at mtime.
func (s *fakeStore) add(dir meta.Ino, name string, ino meta.Ino, typ meta.FileType, mtime time.Time) {
	s.dirs[dir] = append(s.dirs[dir], meta.Dirent{Name: name, Ino: ino, Type: typ})
	slices.SortFunc(s.dirs[dir], func(a, b meta.Dirent) int { return strings.Compare(a.Name, b.Name) })
	s.attrs[ino] = meta.Attr{Ino: ino, Type: typ, Mtime: mtime.UnixNano()}
}

// names lists dir's entries.
func (s *fakeStore) names(dir meta.Ino) []string {
	var out []string
	for _, e := range s.dirs[dir] {
		out = append(out, e.Name)
	}
	return out
}

type fakeDrive struct {
	id        placement.DriveID
	log       *eventLog
	mu        sync.Mutex
	frags     map[erasure.FragmentKey]time.Time // key → mtime
	deletes   int
	deleteErr error
}

func (d *fakeDrive) DeleteFragment(_ context.Context, key erasure.FragmentKey) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.deletes++
	if d.deleteErr != nil {
		return d.deleteErr
	}
	d.log.add("delete " + d.id.String())
	delete(d.frags, key)
	return nil
}

func (d *fakeDrive) ListFragments(_ context.Context, fn func(erasure.FragmentKey, int64, time.Time) error) error {
	d.mu.Lock()
	frags := make(map[erasure.FragmentKey]time.Time, len(d.frags))
	for k, t := range d.frags {
		frags[k] = t
	}
	d.mu.Unlock()
	for k, t := range frags {
		if err := fn(k, 4096, t); err != nil {
			return err
		}
	}
	return nil
}

func (d *fakeDrive) Sync(context.Context) error { d.log.add("sync " + d.id.String()); return nil }

func (d *fakeDrive) has(key erasure.FragmentKey) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.frags[key]
	return ok
}

type fakeDrives map[placement.DriveID]*fakeDrive

func (ds fakeDrives) Drive(_ *clustermap.Map, id placement.DriveID) (Drive, error) {
	d, ok := ds[id]
	if !ok {
		return nil, fmt.Errorf("no drive %v: %w", id, clustermap.ErrNoDrive)
	}
	return d, nil
}

type fakeMaps struct{ m *clustermap.Map }

func (f *fakeMaps) Map(context.Context) (*clustermap.Map, error) { return f.m.Clone(), nil }

// setState sets drive id's state in the map.
func (f *fakeMaps) setState(id placement.DriveID, st clustermap.DriveState) {
	for i := range f.m.Drives {
		if f.m.Drives[i].ID == id {
			f.m.Drives[i].State = st
		}
	}
}

type fakeGuard struct {
	stopped, verifyErr error
	verified           int
}

func (g *fakeGuard) Stopped() error               { return g.stopped }
func (g *fakeGuard) Verify(context.Context) error { g.verified++; return g.verifyErr }

var errCorrupt = errors.New("store corrupt (test)")

// rig is a collector over n up drives with its fakes, at the clock time
// now.
type rig struct {
	c      *Collector
	store  *fakeStore
	drives fakeDrives
	maps   *fakeMaps
	guard  *fakeGuard
	log    *eventLog
}

var now = time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)

func newRig(n int) *rig {
	log := &eventLog{}
	r := &rig{store: newFakeStore(log), drives: fakeDrives{}, maps: &fakeMaps{m: &clustermap.Map{Epoch: 1}}, guard: &fakeGuard{}, log: log}
	for i := range n {
		id := placement.DriveID(i)
		r.drives[id] = &fakeDrive{id: id, log: log, frags: map[erasure.FragmentKey]time.Time{}}
		r.maps.m.Drives = append(r.maps.m.Drives, clustermap.Drive{ID: id, State: clustermap.StateUp})
	}
	r.c = New(Deps{Store: r.store, Drives: r.drives, Maps: r.maps, Guard: r.guard, Now: func() time.Time { return now }})
	return r
}

// queue queues generation gen of stripe 0 of ino, written at mtime on
// drives, and stores its fragments there.
func (r *rig) queue(seq uint64, ino meta.Ino, gen uint64, mtime time.Time, drives ...uint32) []erasure.FragmentKey {
	var keys []erasure.FragmentKey
	for i, id := range drives {
		k := erasure.FragmentKey{Ino: uint64(ino), Gen: gen, Index: uint8(i)}
		r.drives[placement.DriveID(id)].frags[k] = mtime
		keys = append(keys, k)
	}
	r.store.queue = append(r.store.queue, meta.GCItem{Seq: seq, Ino: ino, Gen: gen, Drives: drives, ShardSize: 4096})
	return keys
}
