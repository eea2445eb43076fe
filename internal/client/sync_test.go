package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"poolfs/internal/chunkstore"
	"poolfs/internal/chunkstore/drivetest"
	"poolfs/internal/client"
	"poolfs/internal/clustermap"
	"poolfs/internal/erasure"
	"poolfs/internal/meta"
	"poolfs/internal/placement"
)

// recDrives wraps a client's drives: it records every fragment write
// (deferred or not, when it was called) and every Drive.Sync (when it ran).
// With volatile set it also plays the part of a drive's volatile cache: a
// deferred write stays in memory (visible to this client only) until a
// Sync of its drive writes it through, and powerLoss drops what no Sync
// wrote through, or writes it torn.
type recDrives struct {
	inner    client.Drives
	volatile bool

	// failSync, if set, is asked before each drive sync: an error it
	// returns is the sync's (a drive that stopped answering).
	failSync func(placement.DriveID) error

	mu      sync.Mutex
	writes  map[erasure.FragmentKey]fragWrite
	syncs   map[placement.DriveID][]span
	pending map[placement.DriveID]map[erasure.FragmentKey][]byte
}

type fragWrite struct {
	called   time.Time
	deferred bool
}

type span struct{ start, end time.Time }

func newRecDrives(inner client.Drives, volatile bool) *recDrives {
	return &recDrives{inner: inner, volatile: volatile, writes: map[erasure.FragmentKey]fragWrite{},
		syncs: map[placement.DriveID][]span{}, pending: map[placement.DriveID]map[erasure.FragmentKey][]byte{}}
}

func (r *recDrives) Drive(m *clustermap.Map, id placement.DriveID) (chunkstore.Drive, error) {
	d, err := r.inner.Drive(m, id)
	if err != nil {
		return nil, err
	}
	return &recDrive{Drive: d, id: id, r: r}, nil
}

// counts returns the deferred and the ordinary fragment writes, and the
// Drive.Sync calls.
func (r *recDrives) counts() (deferred, durable, syncs int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, w := range r.writes {
		if w.deferred {
			deferred++
		} else {
			durable++
		}
	}
	for _, s := range r.syncs {
		syncs += len(s)
	}
	return
}

// covered reports whether a Sync of drive id started after key's write was
// called and ended before end.
func (r *recDrives) covered(id placement.DriveID, key erasure.FragmentKey, end time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	w, ok := r.writes[key]
	if !ok {
		return false
	}
	for _, s := range r.syncs[id] {
		if !s.start.Before(w.called) && !s.end.After(end) {
			return true
		}
	}
	return false
}

// powerLoss drops the deferred writes no Sync wrote through; with torn,
// every other one reaches the drive with its second half zeroed instead.
func (r *recDrives) powerLoss(t *testing.T, m *clustermap.Map, torn bool) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	i := 0
	for id, frags := range r.pending {
		for k, b := range frags {
			if i++; torn && i%2 == 0 {
				d, err := r.inner.Drive(m, id)
				if err != nil {
					t.Fatal(err)
				}
				b = append([]byte(nil), b...)
				clear(b[len(b)/2:])
				if err := d.WriteFragment(context.Background(), k, b); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	clear(r.pending)
}

type recDrive struct {
	chunkstore.Drive
	id placement.DriveID
	r  *recDrives
}

func (d *recDrive) WriteFragment(ctx context.Context, key erasure.FragmentKey, frag []byte) error {
	called := time.Now()
	deferred := chunkstore.IsDeferred(ctx)
	r := d.r
	r.mu.Lock()
	r.writes[key] = fragWrite{called: called, deferred: deferred}
	if deferred && r.volatile {
		if r.pending[d.id] == nil {
			r.pending[d.id] = map[erasure.FragmentKey][]byte{}
		}
		r.pending[d.id][key] = append([]byte(nil), frag...)
		r.mu.Unlock()
		return nil
	}
	r.mu.Unlock()
	return d.Drive.WriteFragment(ctx, key, frag)
}

func (d *recDrive) ReadFragment(ctx context.Context, key erasure.FragmentKey, off, n int64, dst []byte) ([]byte, error) {
	d.r.mu.Lock()
	b, ok := d.r.pending[d.id][key]
	d.r.mu.Unlock()
	if !ok {
		return d.Drive.ReadFragment(ctx, key, off, n, dst)
	}
	if n < 0 {
		n = int64(len(b)) - off
	}
	return append(dst[:0], b[off:off+n]...), nil
}

func (d *recDrive) Sync(ctx context.Context) error {
	if f := d.r.failSync; f != nil {
		if err := f(d.id); err != nil {
			return err
		}
	}
	start := time.Now()
	d.r.mu.Lock()
	frags := d.r.pending[d.id]
	delete(d.r.pending, d.id)
	d.r.mu.Unlock()
	for k, b := range frags { // write through what the "cache" holds
		if err := d.Drive.WriteFragment(ctx, k, b); err != nil {
			return err
		}
	}
	err := d.Drive.Sync(ctx)
	d.r.mu.Lock()
	d.r.syncs[d.id] = append(d.r.syncs[d.id], span{start, time.Now()})
	d.r.mu.Unlock()
	return err
}

// recClient returns a client whose drives are recorded, and an ordinary
// second client of the same metadata store and drives (start: 4+2, 64 KiB
// units), with its own caches and its own view of the drives: it does not
// see what the first one's volatile drive caches hold. The recorded client
// syncs only when asked (no SyncDelay).
func recClient(t *testing.T, volatile bool) (*client.Client, *recDrives, *conn) {
	return recClientWith(t, volatile, client.Options{SyncDelay: -1})
}

// recClientWith is recClient with the recorded client's options o.
func recClientWith(t *testing.T, volatile bool, o client.Options) (*client.Client, *recDrives, *conn) {
	t.Helper()
	other := start(t)
	rec := newRecDrives(drivetest.UpOnly(other.Drives), volatile)
	return client.New(other.Meta, other.Maps, rec, o), rec, other
}

// put creates name in the root through c and writes data with one
// handle, then flushes (close) or syncs (fsync) it.
func put(t *testing.T, c *client.Client, name string, data []byte, sync bool) meta.Ino {
	t.Helper()
	ctx := context.Background()
	a, err := c.Meta().Create(ctx, meta.RootIno, name, meta.TypeFile, 0o644, 0, 0, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	f, err := c.OpenAttr(a, name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(ctx, data, 0); err != nil {
		t.Fatal(err)
	}
	if sync {
		err = f.Sync(ctx)
	} else {
		err = f.Flush(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
	return a.Ino
}

// readAll reads file ino through c.
func readAll(c *client.Client, ino meta.Ino) ([]byte, error) {
	ctx := context.Background()
	f, err := c.Open(ctx, ino, "f")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := make([]byte, f.Attr().Size)
	n, err := f.ReadAt(ctx, out, 0)
	if errors.Is(err, io.EOF) && n == len(out) {
		err = nil
	}
	return out[:n], err
}

// A closed file is visible to another client at once (its fragments on
// the drives, its stripes committed) though nothing was synced: close
// ran no fragment sync; one Client.Sync then syncs each drive written
// once, and a second Sync none.
func TestCloseVisibleSyncDurable(t *testing.T) {
	c, rec, other := recClient(t, false)
	files := map[meta.Ino][]byte{}
	for i := range 30 {
		n := 4096
		switch i % 10 {
		case 3:
			n = 65536
		case 7:
			n = 300 << 10 // more than a 256 KiB stripe
		}
		data := randomPiece(n)
		ino := put(t, c, fmt.Sprintf("f%d", i), data, false)
		files[ino] = data
		got, err := readAll(other.Client, ino)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("file %d right after close, read by another client: %d bytes, %v (want %d)", i, len(got), err, n)
		}
	}
	deferred, durable, syncs := rec.counts()
	if deferred == 0 || durable != 0 || syncs != 0 {
		t.Fatalf("closing 30 files: %d deferred and %d durable fragment writes, %d drive syncs; want all deferred, no sync", deferred, durable, syncs)
	}
	if err := c.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, _, syncs = rec.counts()
	if syncs < 1 || syncs > 8 {
		t.Fatalf("Sync after 30 files ran %d drive syncs, want one per drive written (at most 8)", syncs)
	}
	for id, s := range rec.syncs {
		if len(s) != 1 {
			t.Fatalf("drive %v synced %d times", id, len(s))
		}
	}
	if err := c.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, _, again := rec.counts(); again != syncs {
		t.Fatalf("a Sync with nothing written ran %d drive syncs", again-syncs)
	}
	for ino, data := range files {
		if got, err := readAll(other.Client, ino); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("inode %d after sync: %d bytes, %v", ino, len(got), err)
		}
	}
}

// Many writers fsync small files at once: each File.Sync returns only
// after a sync of every drive holding its fragments that began after the
// fragment was written, though they share syncs (group commit).
func TestSyncGroupCommitConcurrent(t *testing.T) {
	c, rec, other := recClient(t, false)
	type done struct {
		ino  meta.Ino
		data []byte
		end  time.Time
	}
	var (
		mu    sync.Mutex
		files []done
		wg    sync.WaitGroup
	)
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				data := randomPiece(4096 * (1 + i%3))
				ino := put(t, c, fmt.Sprintf("w%d-%d", w, i), data, true)
				end := time.Now()
				mu.Lock()
				files = append(files, done{ino, data, end})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	ctx := context.Background()
	for _, f := range files {
		recs, err := other.Meta.Stripes(ctx, f.ino, 0, 0)
		if err != nil || len(recs) != 1 {
			t.Fatalf("inode %d: stripes %v, %v", f.ino, recs, err)
		}
		for i, id := range recs[0].Drives {
			key := erasure.FragmentKey{Ino: uint64(f.ino), Stripe: 0, Gen: recs[0].Gen, Index: uint8(i)}
			if !rec.covered(placement.DriveID(id), key, f.end) {
				t.Fatalf("fsync of inode %d returned before drive %v synced fragment %v", f.ino, id, key)
			}
		}
		if got, err := readAll(other.Client, f.ino); err != nil || !bytes.Equal(got, f.data) {
			t.Fatalf("inode %d: %d bytes, %v", f.ino, len(got), err)
		}
	}
	_, _, syncs := rec.counts()
	t.Logf("60 fsyncs of small files ran %d drive syncs", syncs)
}

// A power loss between close and sync (simulated: the drives lose, or
// tear, the deferred writes no Sync covered, while the metadata keeps
// every commit, the worst order) leaves every fsynced file byte for byte,
// and every other file either byte for byte or reported as lost: never
// another file's bytes, never unreported garbage.
func TestPowerLossBetweenCloseAndSync(t *testing.T) {
	for _, torn := range []bool{false, true} {
		t.Run(fmt.Sprintf("torn=%v", torn), func(t *testing.T) {
			c, rec, other := recClient(t, true)
			synced := map[meta.Ino][]byte{}
			closed := map[meta.Ino][]byte{}
			for i := range 40 {
				data := randomPiece([]int{4096, 65536, 5000, 300 << 10}[i%4])
				// A Sync covers every file closed before it: the last
				// ten files are closed after the last one.
				sync := i%3 == 0 && i < 30
				ino := put(t, c, fmt.Sprintf("f%d", i), data, sync)
				if sync {
					synced[ino] = data
				} else {
					closed[ino] = data
				}
			}
			m, err := other.Client.Map(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			rec.powerLoss(t, m, torn)
			for ino, data := range synced {
				if got, err := readAll(other.Client, ino); err != nil || !bytes.Equal(got, data) {
					t.Fatalf("fsynced inode %d after power loss: %d bytes, %v", ino, len(got), err)
				}
			}
			lost := 0
			for ino, data := range closed {
				got, err := readAll(other.Client, ino)
				switch {
				case err == nil && bytes.Equal(got, data):
				case err != nil && errors.Is(err, client.ErrDataLoss):
					lost++
				default:
					t.Fatalf("closed inode %d after power loss: %d bytes (equal %v), %v: want its data or data loss reported",
						ino, len(got), bytes.Equal(got, data), err)
				}
			}
			if lost == 0 {
				t.Fatal("the simulated power loss lost nothing: the test tests nothing")
			}
		})
	}
}

// A flush that guesses its stripe was never committed (the file was empty
// when the handle opened it) is wrong when another client committed it
// meanwhile: the commit conflicts, and the flush merges over the other
// client's bytes instead of losing them.
func TestFlushGuessConflicts(t *testing.T) {
	c, _, other := recClient(t, false)
	ctx := context.Background()
	a, err := c.Meta().Create(ctx, meta.RootIno, "shared", meta.TypeFile, 0o644, 0, 0, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	mine, err := c.OpenAttr(a, "shared")
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := other.Client.Open(ctx, a.Ino, "shared")
	if err != nil {
		t.Fatal(err)
	}
	first, second := randomPiece(100), randomPiece(100)
	if _, err := theirs.WriteAt(ctx, first, 0); err != nil {
		t.Fatal(err)
	}
	if err := theirs.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := mine.WriteAt(ctx, second, 200); err != nil {
		t.Fatal(err)
	}
	if err := mine.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	want := append(append(append([]byte(nil), first...), make([]byte, 100)...), second...)
	if got, err := readAll(other.Client, a.Ino); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("after both flushes: %d bytes, %v; want the other client's 100 bytes, a hole, then mine", len(got), err)
	}
}

// Nobody fsyncs: SyncDelay after a close, the client syncs the drives it
// wrote by itself, so a power loss then loses nothing that was closed.
func TestBackgroundSyncAfterClose(t *testing.T) {
	c, rec, other := recClientWith(t, true, client.Options{SyncDelay: 50 * time.Millisecond})
	files := map[meta.Ino][]byte{}
	for i := range 5 {
		data := randomPiece(4096)
		files[put(t, c, fmt.Sprintf("f%d", i), data, false)] = data
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		rec.mu.Lock()
		left := 0
		for _, p := range rec.pending {
			left += len(p)
		}
		rec.mu.Unlock()
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d deferred fragments still unsynced 30 s after close with SyncDelay 50ms", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
	m, err := other.Client.Map(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	rec.powerLoss(t, m, false)
	for ino, data := range files {
		if got, err := readAll(other.Client, ino); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("inode %d after the background sync and a power loss: %d bytes, %v", ino, len(got), err)
		}
	}
}

// A drive that went down between close and fsync is skipped (its
// fragments are rebuilt from the others, as for any drive that fails):
// fsync syncs the rest and succeeds instead of failing until the drive is
// back.
func TestSyncSkipsDriveDown(t *testing.T) {
	c, rec, other := recClient(t, false)
	ctx := context.Background()
	var inos []meta.Ino
	for i := range 10 {
		inos = append(inos, put(t, c, fmt.Sprintf("f%d", i), randomPiece(4096), false))
	}
	recs, err := other.Meta.Stripes(ctx, inos[0], 0, 0)
	if err != nil || len(recs) != 1 {
		t.Fatalf("stripes %v, %v", recs, err)
	}
	down := placement.DriveID(recs[0].Drives[0])
	other.Maps.Update(func(m *clustermap.Map) {
		if _, err := m.SetState(down, clustermap.StateDown, time.Now()); err != nil {
			t.Fatal(err)
		}
	})
	if _, err := c.RefreshMap(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Sync(ctx); err != nil {
		t.Fatalf("Sync with drive %v down: %v", down, err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.syncs[down]) != 0 {
		t.Fatalf("the down drive %v was synced", down)
	}
	if len(rec.syncs) == 0 {
		t.Fatal("no drive synced")
	}
}

// TestSyncDriveFailingThenDown: a drive that stops answering fails its
// sync. Once the map says it is down (the management service's answer to
// the report of the failed sync), the fsync succeeds without it, as if it
// had been down before: its fragments are rebuilt from the stripes'
// others, which the fsync made durable. While the map still says it is up,
// the fsync fails and names it.
func TestSyncDriveFailingThenDown(t *testing.T) {
	for _, markDown := range []bool{true, false} {
		t.Run(fmt.Sprintf("markDown=%v", markDown), func(t *testing.T) {
			c, rec, other := recClient(t, false)
			ctx := context.Background()
			inos := []meta.Ino{put(t, c, "f", randomPiece(4096), false)}
			recs, err := other.Meta.Stripes(ctx, inos[0], 0, 0)
			if err != nil || len(recs) != 1 {
				t.Fatalf("stripes %v, %v", recs, err)
			}
			bad := placement.DriveID(recs[0].Drives[0])
			rec.failSync = func(id placement.DriveID) error {
				if id != bad {
					return nil
				}
				if markDown {
					other.Maps.Update(func(m *clustermap.Map) {
						if _, err := m.SetState(bad, clustermap.StateDown, time.Now()); err != nil {
							t.Error(err)
						}
					})
				}
				return errors.New("drive not answering")
			}
			err = c.Sync(ctx)
			if markDown && err != nil {
				t.Fatalf("Sync with drive %v failing and then down: %v", bad, err)
			}
			if !markDown && (err == nil || !strings.Contains(err.Error(), bad.String())) {
				t.Fatalf("Sync with drive %v failing and still up: %v, want an error naming it", bad, err)
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if len(rec.syncs) == 0 {
				t.Fatal("no drive synced")
			}
		})
	}
}
