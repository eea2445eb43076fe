package chunkstore

import (
	"bytes"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"poolfs/internal/erasure"
)

// syncLog replaces a segments drive's fdatasync and records each call's
// start and end per file descriptor.
type syncLog struct {
	slow  time.Duration
	mu    sync.Mutex
	calls []syncCall
}

type syncCall struct {
	fd         int
	start, end time.Time
}

func (l *syncLog) hook(fd int) error {
	start := time.Now()
	err := unix.Fdatasync(fd)
	time.Sleep(l.slow) // widen the window in which a sync is running
	l.mu.Lock()
	l.calls = append(l.calls, syncCall{fd, start, time.Now()})
	l.mu.Unlock()
	return err
}

func (l *syncLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.calls)
}

// covered reports whether an fdatasync of fd started after called (a
// write began) and ended before returned.
func (l *syncLog) covered(fd int, called, returned time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.calls {
		if c.fd == fd && !c.start.Before(called) && !c.end.After(returned) {
			return true
		}
	}
	return false
}

func TestDeferredWritesSyncOnce(t *testing.T) {
	d := openTest(t, t.TempDir(), Options{Format: FormatSegments, DirectIO: true, SegmentSize: 1 << 20})
	sd := d.impl.(*segmentDrive)
	var log syncLog
	sd.fdatasync = log.hook
	want := map[erasure.FragmentKey][]byte{}
	for i := range 40 {
		b := pattern(Align*(1+i%3), uint64(i))
		if err := d.WriteFragment(Deferred(ctx), key(i), b); err != nil {
			t.Fatal(err)
		}
		want[key(i)] = b
	}
	if n := log.count(); n != 0 {
		t.Fatalf("deferred writes ran %d fdatasyncs, want none", n)
	}
	// Visible before any sync.
	for k, b := range want {
		if got, err := d.ReadFragment(ctx, k, 0, -1, nil); err != nil || !bytes.Equal(got, b) {
			t.Fatalf("deferred fragment %v: %d bytes, %v", k, len(got), err)
		}
	}
	if err := d.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if n := log.count(); n < 1 || n > activeSegments {
		t.Fatalf("Sync ran %d fdatasyncs for 40 deferred writes, want 1..%d (one per segment)", n, activeSegments)
	}
	before := log.count()
	if err := d.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if n := log.count(); n != before {
		t.Fatalf("Sync with nothing deferred ran %d fdatasyncs", n-before)
	}
	// An ordinary write still syncs before it returns.
	if err := d.WriteFragment(ctx, key(100), pattern(Align, 100)); err != nil {
		t.Fatal(err)
	}
	if n := log.count(); n != before+1 {
		t.Fatalf("an ordinary write ran %d fdatasyncs, want 1", n-before)
	}
}

// Every deferred write that returned before a Sync began is covered by an
// fdatasync of its segment that started after the write was called and
// ended before that Sync returned, with writers and syncers racing.
func TestDeferredSyncCoversConcurrentWrites(t *testing.T) {
	d := openTest(t, t.TempDir(), Options{Format: FormatSegments, DirectIO: true, SegmentSize: 1 << 20})
	sd := d.impl.(*segmentDrive)
	log := syncLog{slow: time.Millisecond}
	sd.fdatasync = log.hook
	type write struct {
		k            erasure.FragmentKey
		called, done time.Time
	}
	var (
		mu     sync.Mutex
		writes []write
		next   atomic.Int64
		wg     sync.WaitGroup
		failed atomic.Pointer[string]
	)
	fail := func(s string) { failed.CompareAndSwap(nil, &s) }
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				i := int(next.Add(1))
				called := time.Now()
				if err := d.WriteFragment(Deferred(ctx), key(i), pattern(Align, uint64(i))); err != nil {
					fail(err.Error())
					return
				}
				mu.Lock()
				writes = append(writes, write{key(i), called, time.Now()})
				mu.Unlock()
			}
		}()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 + w {
				start := time.Now()
				mu.Lock()
				var before []write
				for _, x := range writes {
					if x.done.Before(start) {
						before = append(before, x)
					}
				}
				mu.Unlock()
				if err := d.Sync(ctx); err != nil {
					fail(err.Error())
					return
				}
				returned := time.Now()
				for _, x := range before {
					sd.mu.RLock()
					l := sd.mu.index[x.k]
					sd.mu.RUnlock()
					if !log.covered(l.seg.fd, x.called, returned) {
						fail("write of " + x.k.String() + " returned before a Sync that no fdatasync of its segment covered")
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	if p := failed.Load(); p != nil {
		t.Fatal(*p)
	}
}

// A power loss (simulated: the unsynced record's blocks read back as
// zeros or half written) loses deferred writes no Sync covered, whole,
// and never one a Sync covered.
func TestDeferredPowerLoss(t *testing.T) {
	for _, tear := range []string{"zeroed", "torn"} {
		t.Run(tear, func(t *testing.T) {
			dir := t.TempDir()
			opts := Options{Format: FormatSegments, DirectIO: true, SegmentSize: 1 << 20}
			d := openTest(t, dir, opts)
			want := map[erasure.FragmentKey][]byte{}
			for i := range 4 {
				b := pattern(2*Align, uint64(i))
				if err := d.WriteFragment(Deferred(ctx), key(i), b); err != nil {
					t.Fatal(err)
				}
				want[key(i)] = b
			}
			if err := d.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			lost := key(50)
			if err := d.WriteFragment(Deferred(ctx), lost, pattern(4*Align, 50)); err != nil {
				t.Fatal(err)
			}
			sd := d.impl.(*segmentDrive)
			l := sd.mu.index[lost]
			path := l.seg.path
			crash(t, d)
			fd, err := unix.Open(path, unix.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			z := make([]byte, Align)
			if tear == "zeroed" {
				for off := l.off; off < l.off+Align+l.length; off += Align {
					pwriteFull(fd, z, off)
				}
			} else {
				pwriteFull(fd, z, l.off+Align+2*Align) // the record's third block never reached the disk
			}
			unix.Close(fd)
			d = openTest(t, dir, opts)
			checkContents(t, d, want)
		})
	}
}

func TestDeferredSyncFailureIsSticky(t *testing.T) {
	d := openTest(t, t.TempDir(), segOpts())
	sd := d.impl.(*segmentDrive)
	if err := d.WriteFragment(Deferred(ctx), key(1), pattern(Align, 1)); err != nil {
		t.Fatal(err)
	}
	sd.fdatasync = func(int) error { return unix.EIO }
	if err := d.Sync(ctx); !errors.Is(err, ErrFailed) {
		t.Fatalf("Sync with failing fdatasync: %v, want ErrFailed", err)
	}
	sd.fdatasync = unix.Fdatasync
	if err := d.Sync(ctx); !errors.Is(err, ErrFailed) {
		t.Fatalf("Sync after a failed one: %v, want sticky ErrFailed", err)
	}
	if err := d.WriteFragment(Deferred(ctx), key(2), pattern(Align, 2)); !errors.Is(err, ErrFailed) {
		t.Fatalf("write after a failed Sync: %v, want ErrFailed", err)
	}
}

// The files format: deferred writes are visible at once, and Sync makes
// them durable (they survive a reopen; there is no fdatasync hook here, so
// this checks the contract, not the number of syncs).
func TestDeferredFilesFormat(t *testing.T) {
	dir := t.TempDir()
	d := openTest(t, dir, Options{Format: FormatFiles, DirectIO: true})
	want := map[erasure.FragmentKey][]byte{}
	for i := range 10 {
		b := pattern(Align, uint64(i))
		if err := d.WriteFragment(Deferred(ctx), key(i), b); err != nil {
			t.Fatal(err)
		}
		want[key(i)] = b
	}
	checkContents(t, d, want)
	if !d.impl.(*fileDrive).deferred.pending() {
		t.Fatal("deferred writes not counted")
	}
	if err := d.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if d.impl.(*fileDrive).deferred.pending() {
		t.Fatal("Sync left deferred writes pending")
	}
	crash(t, d)
	d = openTest(t, dir, Options{Format: FormatFiles, DirectIO: true})
	checkContents(t, d, want)
}

// Small deferred records (through the page cache) and O_DIRECT records
// share segments: each reads back whole, before and after a sync and a
// reopen.
func TestDeferredCachedAndDirectMix(t *testing.T) {
	for _, f := range formats {
		t.Run(f.name, func(t *testing.T) {
			dir := t.TempDir()
			opts := f.opts
			opts.DirectIO = true
			d := openTest(t, dir, opts)
			want := map[erasure.FragmentKey][]byte{}
			for i := range 24 {
				size := Align * (1 + i%4)
				ctx := ctx
				switch i % 3 {
				case 0:
					ctx = Deferred(ctx)
				case 1:
					ctx, size = Deferred(ctx), maxCachedFragment+Align // deferred, too big for the cache
				}
				b := pattern(size, uint64(i))
				if err := d.WriteFragment(ctx, key(i), b); err != nil {
					t.Fatal(err)
				}
				want[key(i)] = b
			}
			checkContents(t, d, want)
			if err := d.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			checkContents(t, d, want)
			crash(t, d)
			d = openTest(t, dir, opts)
			checkContents(t, d, want)
		})
	}
}

// A clean close makes deferred writes durable (segments: the seal; files:
// a syncfs).
func TestDeferredDurableAtClose(t *testing.T) {
	d := openTest(t, t.TempDir(), Options{Format: FormatFiles, DirectIO: true})
	if err := d.WriteFragment(Deferred(ctx), key(1), pattern(Align, 1)); err != nil {
		t.Fatal(err)
	}
	fd := d.impl.(*fileDrive)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if fd.deferred.pending() {
		t.Fatal("a deferred write is still pending after Close")
	}
}
