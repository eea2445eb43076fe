package chunkstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"poolfs/internal/erasure"
)

var ctx = context.Background()

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func openTest(t testing.TB, dir string, opts Options) *LocalDrive {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quietLogger()
	}
	d, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func pattern(n int, seed uint64) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, 1))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func key(i int) erasure.FragmentKey {
	return erasure.FragmentKey{Ino: uint64(i) * 7919, Stripe: uint64(i % 5), Gen: uint64(i) + 1, Index: uint8(i % 10)}
}

// modes are the I/O paths every drive test runs on: O_DIRECT and buffered
// on t.TempDir() (ext4 here), and /dev/shm (tmpfs; O_DIRECT since Linux
// 6.6, else the fallback). TestDirectFallback forces the EINVAL fallback.
func modes(t *testing.T) map[string]func(t *testing.T) string {
	m := map[string]func(t *testing.T) string{
		"direct":   func(t *testing.T) string { return t.TempDir() },
		"buffered": func(t *testing.T) string { return t.TempDir() },
	}
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		m["tmpfs"] = func(t *testing.T) string {
			dir, err := os.MkdirTemp("/dev/shm", "chunkstore-test-")
			if err != nil {
				t.Skip(err)
			}
			t.Cleanup(func() { os.RemoveAll(dir) })
			return dir
		}
	}
	return m
}

// formats are the on-disk formats every drive test runs on. Segments are
// small in tests so that writes retire and seal segments.
var formats = []struct {
	name string
	opts Options
}{
	{"files", Options{Format: FormatFiles}},
	{"segments", Options{Format: FormatSegments, SegmentSize: 64 << 10}},
}

func forEachFormat(t *testing.T, fn func(t *testing.T, opts Options)) {
	for _, f := range formats {
		t.Run(f.name, func(t *testing.T) { fn(t, f.opts) })
	}
}

func forEachMode(t *testing.T, fn func(t *testing.T, newDir func(t *testing.T) string, opts Options)) {
	forEachFormat(t, func(t *testing.T, opts Options) {
		for name, newDir := range modes(t) {
			t.Run(name, func(t *testing.T) {
				opts.DirectIO = name != "buffered"
				fn(t, newDir, opts)
			})
		}
	})
}

// files returns the files-format implementation of d.
func files(t testing.TB, d *LocalDrive) *fileDrive {
	f, ok := d.impl.(*fileDrive)
	if !ok {
		t.Fatalf("drive %s is not in the files format", d.Dir())
	}
	return f
}

func TestRoundTrip(t *testing.T) {
	forEachMode(t, func(t *testing.T, newDir func(t *testing.T) string, opts Options) {
		d := openTest(t, newDir(t), opts)
		testRoundTrip(t, d)
		if opts.DirectIO {
			t.Logf("O_DIRECT active after writes: %v", d.DirectIO())
		}
	})
}

// testRoundTrip writes fragments of several sizes from aligned and
// unaligned buffers to d and reads them back whole and in ranges, into
// dst buffers of every kind. Every Drive passes it.
func testRoundTrip(t *testing.T, d Drive) {
	for i, size := range []int{4096, 1<<20 + 4096, 4 << 20} {
		for _, aligned := range []bool{true, false} {
			k := key(i*2 + map[bool]int{true: 0, false: 1}[aligned])
			want := pattern(size, uint64(size))
			src := want
			if aligned {
				src = AlignedBuffer(size)
				copy(src, want)
			} else {
				src = make([]byte, size+1)[1:] // deliberately misaligned
				copy(src, want)
			}
			if err := d.WriteFragment(ctx, k, src); err != nil {
				t.Fatal(err)
			}
			got, err := d.ReadFragment(ctx, k, 0, -1, nil)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("size %d: whole read mismatch (err %v)", size, err)
			}
			// Ranges into aligned, unaligned and too-small dst.
			for _, dst := range [][]byte{nil, AlignedBuffer(size), make([]byte, size+1)[1:]} {
				off, n := int64(size/2)&^(Align-1), int64(Align)
				got, err := d.ReadFragment(ctx, k, off, n, dst)
				if err != nil || !bytes.Equal(got, want[off:off+n]) {
					t.Fatalf("size %d: range read mismatch (err %v)", size, err)
				}
				if cap(dst) >= int(n) && &got[0] != &dst[0] {
					t.Fatalf("read did not use dst")
				}
				got, err = d.ReadFragment(ctx, k, off, -1, dst)
				if err != nil || !bytes.Equal(got, want[off:]) {
					t.Fatalf("size %d: tail read mismatch (err %v)", size, err)
				}
			}
		}
	}
}

func TestDirectFallback(t *testing.T) {
	d := openTest(t, t.TempDir(), Options{DirectIO: true})
	if err := d.WriteFragment(ctx, key(1), AlignedBuffer(Align)); err != nil {
		t.Fatal(err)
	}
	t.Logf("t.TempDir(): O_DIRECT supported = %v", d.DirectIO())

	// A file system that refuses O_DIRECT with EINVAL (as tmpfs did before
	// Linux 6.6): the drive falls back to buffered I/O once, logged once.
	var logBuf bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(lockedWriter{&mu, &logBuf}, nil))
	s := openTest(t, t.TempDir(), Options{Format: FormatFiles, DirectIO: true, Logger: log})
	files(t, s).open = func(path string, flags int, mode uint32) (int, error) {
		if flags&unix.O_DIRECT != 0 {
			return -1, unix.EINVAL
		}
		return unix.Open(path, flags, mode)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			want := pattern(2*Align, uint64(i))
			if err := s.WriteFragment(ctx, key(i), want); err != nil {
				t.Error(err)
			}
			if got, err := s.ReadFragment(ctx, key(i), 0, -1, nil); err != nil || !bytes.Equal(got, want) {
				t.Error("round trip after fallback failed", err)
			}
		})
	}
	wg.Wait()
	if s.DirectIO() {
		t.Fatal("still using O_DIRECT after EINVAL")
	}
	mu.Lock()
	defer mu.Unlock()
	if n := strings.Count(logBuf.String(), "falling back"); n != 1 {
		t.Fatalf("fallback logged %d times, want 1:\n%s", n, logBuf.String())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestErrors(t *testing.T) {
	forEachFormat(t, testErrors)
}

func testErrors(t *testing.T, opts Options) {
	dir := t.TempDir()
	opts.DirectIO = true
	d := openTest(t, dir, opts)
	_, err := d.ReadFragment(ctx, key(9), 0, -1, nil)
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), key(9).String()) {
		t.Fatalf("want ErrNotFound naming drive and key, got %v", err)
	}
	testInvalid(t, d)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := d.WriteFragment(cctx, key(3), make([]byte, Align)); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled ctx: %v", err)
	}
	if _, err := Open(dir, Options{}); err == nil {
		t.Fatal("second Open of a locked drive succeeded")
	}
	d.Close()
	if err := d.WriteFragment(ctx, key(3), make([]byte, Align)); !errors.Is(err, ErrFailed) {
		t.Fatalf("write after Close: %v", err)
	}
}

// testInvalid checks that d, an empty drive, refuses unaligned and
// out-of-range writes and reads with ErrInvalid, storing nothing. Every
// Drive passes it.
func testInvalid(t *testing.T, d Drive) {
	if err := d.WriteFragment(ctx, key(1), pattern(2*Align, 1)); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		write  []byte
		off, n int64
	}{
		"empty":         {write: []byte{}},
		"unaligned len": {write: make([]byte, Align+1)},
		"odd len":       {write: make([]byte, 100)},
		"unaligned off": {off: 100, n: Align},
		"unaligned n":   {off: 0, n: 100},
		"past end":      {off: Align, n: 2 * Align},
		"off past end":  {off: 3 * Align, n: -1},
		"negative off":  {off: -Align, n: Align},
	} {
		t.Run(name, func(t *testing.T) {
			var err error
			if tc.write != nil {
				err = d.WriteFragment(ctx, key(2), tc.write)
			} else {
				_, err = d.ReadFragment(ctx, key(1), tc.off, tc.n, nil)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("want ErrInvalid, got %v", err)
			}
		})
	}
	if u, _ := d.Stat(ctx); u.Fragments != 1 || u.Used != 2*Align {
		t.Fatalf("usage after invalid writes: %+v", u)
	}
}

func TestDeleteListUsage(t *testing.T) {
	forEachMode(t, func(t *testing.T, newDir func(t *testing.T) string, opts Options) {
		opts.Capacity = 10 * Align
		testDeleteListUsage(t, openTest(t, newDir(t), opts))
	})
}

// testDeleteListUsage fills d, an empty drive of 10 blocks, deletes,
// rewrites, lists and checks its usage. Every Drive passes it.
func testDeleteListUsage(t *testing.T, d Drive) {
	want := map[erasure.FragmentKey]int64{}
	for i := range 4 {
		size := (i + 1) * Align
		if err := d.WriteFragment(ctx, key(i), pattern(size, uint64(i))); err != nil {
			t.Fatal(err)
		}
		want[key(i)] = int64(size)
	}
	// 1+2+3+4 = 10 blocks: full. Another block is refused before writing.
	if err := d.WriteFragment(ctx, key(9), make([]byte, Align)); !errors.Is(err, ErrFull) {
		t.Fatalf("want ErrFull, got %v", err)
	}
	if _, err := d.ReadFragment(ctx, key(9), 0, -1, nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("refused write left a fragment: %v", err)
	}
	checkUsage(t, d, Usage{Capacity: 10 * Align, Used: 10 * Align, Fragments: 4})
	if err := d.DeleteFragment(ctx, key(1)); err != nil {
		t.Fatal(err)
	}
	// Rewriting a key (a retry) replaces it without double counting.
	if err := d.WriteFragment(ctx, key(0), pattern(Align, 0)); err != nil {
		t.Fatal(err)
	}
	if err := d.DeleteFragment(ctx, key(1)); err != nil {
		t.Fatalf("deleting a missing fragment: %v", err)
	}
	delete(want, key(1))
	checkUsage(t, d, Usage{Capacity: 10 * Align, Used: 8 * Align, Fragments: 3})
	if _, err := d.ReadFragment(ctx, key(1), 0, -1, nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted fragment readable: %v", err)
	}
	checkList(t, d, want)
	stop := errors.New("stop")
	calls := 0
	if err := d.ListFragments(ctx, func(erasure.FragmentKey, int64, time.Time) error { calls++; return stop }); err != stop || calls != 1 {
		t.Fatalf("list did not stop at fn error: %v after %d calls", err, calls)
	}
}

func checkUsage(t *testing.T, d Drive, want Usage) {
	t.Helper()
	got, err := d.Stat(ctx)
	if err != nil || got.Capacity != want.Capacity || got.Used != want.Used || got.Fragments != want.Fragments {
		t.Fatalf("usage %+v (err %v), want %+v", got, err, want)
	}
}

func checkList(t *testing.T, d Drive, want map[erasure.FragmentKey]int64) {
	t.Helper()
	got := map[erasure.FragmentKey]int64{}
	err := d.ListFragments(ctx, func(k erasure.FragmentKey, size int64, mtime time.Time) error {
		if time.Since(mtime) > time.Hour {
			t.Errorf("odd mtime %v", mtime)
		}
		got[k] = size
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("list %v, want %v", got, want)
	}
}

func TestReopenAfterCrash(t *testing.T) {
	dir := t.TempDir()
	d := openTest(t, dir, Options{Format: FormatFiles, DirectIO: true})
	want := map[erasure.FragmentKey]int64{}
	for i := range 20 {
		if err := d.WriteFragment(ctx, key(i), pattern(Align*(1+i%3), uint64(i))); err != nil {
			t.Fatal(err)
		}
		want[key(i)] = int64(Align * (1 + i%3))
	}
	u, _ := d.Stat(ctx)
	d.Close()
	// Simulate a crash mid-write: a temp file, plus foreign junk and a valid
	// name in the wrong fanout directory.
	k := key(100)
	fan := filepath.Join(dir, fragsDir, fanoutName(fanout(k)))
	wrong := filepath.Join(dir, fragsDir, fanoutName((fanout(k)+1)%fanoutDirs))
	tmp := filepath.Join(fan, tmpPrefix+fragName(k)+"-7")
	for _, p := range []string{tmp, filepath.Join(fan, "junk.txt"), filepath.Join(fan, "0001.2.3.4"), filepath.Join(wrong, fragName(k))} {
		if err := os.WriteFile(p, make([]byte, 3*Align), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d = openTest(t, dir, Options{Format: FormatSegments, DirectIO: true}) // keeps its format
	if d.Format() != FormatFiles {
		t.Fatalf("reopened drive has format %q", d.Format())
	}
	if got, _ := d.Stat(ctx); got.Used != u.Used || got.Fragments != u.Fragments {
		t.Fatalf("usage after reopen %+v, want %+v", got, u)
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Fatalf("temp file survived Open: %v", err)
	}
	checkList(t, d, want)
	if _, err := d.ReadFragment(ctx, k, 0, -1, nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("temp file readable as fragment: %v", err)
	}
}

func TestConcurrent(t *testing.T) {
	forEachFormat(t, testConcurrent)
}

func testConcurrent(t *testing.T, opts Options) {
	opts.DirectIO = true
	testConcurrentOn(t, openTest(t, t.TempDir(), opts))
}

// testConcurrentOn writes, reads back and deletes fragments of d, an empty
// drive, from many goroutines and checks the usage after. Every Drive
// passes it.
func testConcurrentOn(t *testing.T, d Drive) {
	const workers, per = 16, 8
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range per {
				n := w*per + i
				data := pattern(Align*(1+n%4), uint64(n))
				if err := d.WriteFragment(ctx, key(n), data); err != nil {
					t.Error(err)
					return
				}
				// Read back something written by another worker, or ours.
				got, err := d.ReadFragment(ctx, key(n), 0, -1, nil)
				if err != nil || !bytes.Equal(got, data) {
					t.Errorf("fragment %d mismatch: %v", n, err)
				}
				if n%3 == 0 {
					if err := d.DeleteFragment(ctx, key(n)); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	wg.Wait()
	var used, frags int64
	for n := range workers * per {
		if n%3 != 0 {
			used += int64(Align * (1 + n%4))
			frags++
		}
	}
	u, _ := d.Stat(ctx)
	if u.Used != used || u.Fragments != frags {
		t.Fatalf("usage %+v, want used %d fragments %d", u, used, frags)
	}
}

func TestDirSyncerGroupCommit(t *testing.T) {
	s := newDirSyncer(t.TempDir())
	var mu sync.Mutex
	syncs := 0
	s.sync = func(int) error {
		mu.Lock()
		syncs++
		mu.Unlock()
		time.Sleep(2 * time.Millisecond)
		return nil
	}
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			if err := s.commit(i % 2); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if syncs >= 64 {
		t.Fatalf("no grouping: %d syncs for 64 commits", syncs)
	}
	t.Logf("64 commits to 2 dirs: %d fsyncs", syncs)
	s.sync = func(int) error { return errors.New("EIO") }
	if err := s.commit(0); err == nil {
		t.Fatal("fsync error not reported")
	}
	s.sync = func(int) error { return nil }
	if err := s.commit(0); err == nil {
		t.Fatal("fsync error not sticky")
	}
}

// TestRemovedDirectoryIsFailed: a drive whose directory is deleted under
// it is a failed drive (ErrFailed from writes and Stat, for good), not a
// drive that lost some fragments (ENOENT).
func TestRemovedDirectoryIsFailed(t *testing.T) {
	forEachFormat(t, func(t *testing.T, opts Options) {
		dir := t.TempDir()
		d := openTest(t, dir, opts)
		for i := range 3 {
			if err := d.WriteFragment(ctx, key(i), pattern(Align, uint64(i))); err != nil {
				t.Fatal(err)
			}
		}
		if sd, ok := d.impl.(*segmentDrive); ok {
			sd.bg.Wait() // spare segments being made would race RemoveAll's walk
		}
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		for i := 3; i < 6; i++ {
			if err := d.WriteFragment(ctx, key(i), pattern(Align, uint64(i))); !errors.Is(err, ErrFailed) {
				t.Fatalf("write %d after the directory was removed: %v, want ErrFailed", i, err)
			}
		}
		if _, err := d.Stat(ctx); !errors.Is(err, ErrFailed) {
			t.Fatalf("stat after the directory was removed: %v, want ErrFailed", err)
		}
	})
}
