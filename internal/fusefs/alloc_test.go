package fusefs

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"poolfs/internal/cluster"
)

// TestFallocateProperty runs seeded random sequences of writes, holes
// punched, ranges zeroed, preallocations and truncates on a file in the
// mount and on a reference file on the local disk, and compares the two
// byte for byte (and their sizes) every few steps, through the open
// descriptor, and at the end after a close through a fresh read-only
// descriptor (page cache) too. On the default mount and one whose writes
// go through the page cache.
func TestFallocateProperty(t *testing.T) {
	c := startCluster(t, cluster0())
	mnt := mount(t, c)
	cached, _ := mountWith(t, c, Options{AllowOther: true, URing: testURing(), CachedWrites: true})
	for _, m := range []struct{ name, dir string }{{"default", mnt}, {"cached-writes", cached}} {
		t.Run(m.name, func(t *testing.T) {
			dir := filepath.Join(m.dir, m.name)
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			fallocateProperty(t, dir, t.TempDir())
		})
	}
}

// fallocateProperty is TestFallocateProperty in directory mnt, with
// reference files in ref.
func fallocateProperty(t *testing.T, mnt, ref string) {
	const sb = 4 * 64 << 10 // the test cluster's stripe
	const maxEnd = 10 * sb
	for seed := int64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewSource(seed))
			name := fmt.Sprint("f", seed)
			open := func() (*os.File, *os.File) {
				a, err := os.OpenFile(filepath.Join(mnt, name), os.O_RDWR|os.O_CREATE, 0o644)
				if err != nil {
					t.Fatal(err)
				}
				b, err := os.OpenFile(filepath.Join(ref, name), os.O_RDWR|os.O_CREATE, 0o644)
				if err != nil {
					t.Fatal(err)
				}
				return a, b
			}
			got, want := open()
			// rangeAt picks a range near stripe boundaries half the time.
			rangeAt := func() (int64, int64) {
				off := rng.Int63n(maxEnd)
				n := rng.Int63n(3*sb) + 1
				if rng.Intn(2) == 0 {
					off = off / sb * sb
					if rng.Intn(2) == 0 {
						off += int64(rng.Intn(3)) - 1
					}
					off = max(off, 0)
				}
				return off, n
			}
			var log []string
			for step := 0; step < 60; step++ {
				off, n := rangeAt()
				var op string
				var errA, errB error
				switch k := rng.Intn(7); k {
				case 0, 1:
					p := make([]byte, n)
					rng.Read(p)
					op = "write"
					_, errA = got.WriteAt(p, off)
					_, errB = want.WriteAt(p, off)
				case 2:
					op = "punch"
					mode := uint32(unix.FALLOC_FL_PUNCH_HOLE | unix.FALLOC_FL_KEEP_SIZE)
					errA, errB = unix.Fallocate(int(got.Fd()), mode, off, n), unix.Fallocate(int(want.Fd()), mode, off, n)
				case 3:
					op = "zero"
					mode := uint32(unix.FALLOC_FL_ZERO_RANGE)
					if rng.Intn(2) == 0 {
						op, mode = "zero-keep", mode|unix.FALLOC_FL_KEEP_SIZE
					}
					errA, errB = unix.Fallocate(int(got.Fd()), mode, off, n), unix.Fallocate(int(want.Fd()), mode, off, n)
				case 4:
					op = "prealloc"
					mode := uint32(0)
					if rng.Intn(2) == 0 {
						op, mode = "prealloc-keep", unix.FALLOC_FL_KEEP_SIZE
					}
					errA, errB = unix.Fallocate(int(got.Fd()), mode, off, n), unix.Fallocate(int(want.Fd()), mode, off, n)
				case 5:
					op, off, n = "truncate", rng.Int63n(maxEnd), 0
					errA, errB = got.Truncate(off), want.Truncate(off)
				case 6:
					op, n = "close-reopen", 0
					errA, errB = got.Close(), want.Close()
					got, want = open()
				}
				log = append(log, fmt.Sprintf("%s %d+%d", op, off, n))
				if errA != nil || errB != nil {
					t.Fatalf("step %d (%v): mount: %v, reference: %v", step, log, errA, errB)
				}
				if step%3 == 2 {
					compare(t, got, want, log)
				}
			}
			got.Close()
			want.Close()
			got, want = open()
			compare(t, got, want, log)
			got.Close()
			ro, err := os.Open(filepath.Join(mnt, name))
			if err != nil {
				t.Fatal(err)
			}
			compare(t, ro, want, log)
			ro.Close()
			want.Close()
		})
	}
}

// compare fails unless a and b have the same size and bytes.
func compare(t *testing.T, a, b *os.File, log []string) {
	t.Helper()
	sa, err := a.Stat()
	if err != nil {
		t.Fatal(err)
	}
	sb, err := b.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if sa.Size() != sb.Size() {
		t.Fatalf("after %v: size %d, reference %d", log, sa.Size(), sb.Size())
	}
	pa, pb := make([]byte, sa.Size()), make([]byte, sb.Size())
	if _, err := a.ReadAt(pa, 0); err != nil && len(pa) > 0 {
		t.Fatalf("read: %v", err)
	}
	if _, err := b.ReadAt(pb, 0); err != nil && len(pb) > 0 {
		t.Fatalf("read reference: %v", err)
	}
	if !bytes.Equal(pa, pb) {
		i := 0
		for i < len(pa) && pa[i] == pb[i] {
			i++
		}
		t.Fatalf("after %v: bytes differ from offset %d", log, i)
	}
}

// TestFallocateModes: the unsupported modes are EOPNOTSUPP; util-linux
// fallocate preallocates (the space shows in st_blocks and the size) and
// punches holes (the space comes back, the bytes read as zeros).
func TestFallocateModes(t *testing.T) {
	c := startCluster(t, cluster0())
	mnt := mount(t, c)
	const sb = 4 * 64 << 10
	p := filepath.Join(mnt, "f")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(bytes.Repeat([]byte{9}, 4*sb)); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []uint32{unix.FALLOC_FL_COLLAPSE_RANGE, unix.FALLOC_FL_INSERT_RANGE, unix.FALLOC_FL_PUNCH_HOLE} {
		if err := unix.Fallocate(int(f.Fd()), mode, 0, sb); err != syscall.EOPNOTSUPP {
			t.Errorf("mode %#x: %v, want EOPNOTSUPP", mode, err)
		}
	}
	if _, err := exec.LookPath("fallocate"); err != nil {
		t.Log("no fallocate(1): system calls checked only")
		return
	}
	stat := func(p string) (size, used int64) {
		t.Helper()
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		return st.Size, st.Blocks * 512
	}
	g := filepath.Join(mnt, "g")
	if out, err := exec.Command("fallocate", "-l", "16M", g).CombinedOutput(); err != nil {
		t.Fatalf("fallocate -l 16M: %v: %s", err, out)
	}
	if size, used := stat(g); size != 16<<20 || used != 16<<20 {
		t.Fatalf("fallocate -l 16M: size %d, %d bytes stored", size, used)
	}
	if out, err := exec.Command("fallocate", "-p", "-o", "1M", "-l", "8M", g).CombinedOutput(); err != nil {
		t.Fatalf("fallocate -p: %v: %s", err, out)
	}
	if size, used := stat(g); size != 16<<20 || used != 8<<20 {
		t.Fatalf("fallocate -p 8M of 16M: size %d, %d bytes stored", size, used)
	}
	b, err := os.ReadFile(g)
	if err != nil || !bytes.Equal(b, make([]byte, 16<<20)) {
		t.Fatalf("read back: %d bytes, %v (not all zeros)", len(b), err)
	}
}

// TestPreallocateTakesSpace: preallocation takes the range's space from
// the pool at once (the pool's usage grows by the range's stripes), a
// later write over the range does not grow it again and reads back, and a
// preallocation larger than the pool fails with ENOSPC having written
// nothing.
func TestPreallocateTakesSpace(t *testing.T) {
	c := startCluster(t, cluster.Config{Drives: 12, Scheme: "4+2", Unit: 64 << 10, DriveSize: 8 << 20})
	mnt := mount(t, c)
	ctx := context.Background()
	usage := func() uint64 {
		t.Helper()
		root, err := c.Store.Getattr(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		u, _, err := c.Store.PoolUsage(ctx, root.Layout.Pool)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	res := filepath.Join(mnt, "reserved")
	f, err := os.Create(res)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const size = 6 << 20 // 24 stripes of 4 x 64 KiB
	before := usage()
	if err := unix.Fallocate(int(f.Fd()), 0, 0, size); err != nil {
		t.Fatalf("preallocate %d bytes: %v", size, err)
	}
	const raw = size / 4 * 6 // 4+2
	allocated := usage()
	if allocated-before < raw {
		t.Fatalf("preallocating %d bytes took %d raw bytes, want at least %d", size, allocated-before, raw)
	}
	if err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_KEEP_SIZE, size, 1<<30); err != syscall.ENOSPC {
		t.Fatalf("preallocate 1 GiB in a pool of 96 MiB: %v, want ENOSPC", err)
	}
	if u := usage(); u != allocated {
		t.Fatalf("a refused preallocation changed the pool's usage from %d to %d", allocated, u)
	}
	data := make([]byte, size)
	rand.New(rand.NewSource(1)).Read(data)
	for off := 0; off < size; off += 100 << 10 {
		if _, err := f.WriteAt(data[off:min(off+100<<10, size)], int64(off)); err != nil {
			t.Fatalf("write at %d into the preallocated range: %v", off, err)
		}
	}
	if err := f.Sync(); err != nil {
		t.Fatalf("fsync: %v", err)
	}
	if u := usage(); u != allocated {
		t.Fatalf("writing the preallocated range changed the pool's usage from %d to %d", allocated, u)
	}
	got, err := os.ReadFile(res)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes, %v (equal %v)", len(got), err, bytes.Equal(got, data))
	}
}

// TestPreallocatedWriteOnFullPool checks fallocate's promise where it is
// hardest to keep: once another file has filled the pool (its drives are
// at their client write limits), a write over the whole preallocated range
// still succeeds, because the drives admit the new generation of a stripe
// they hold beyond the limit, and the bytes read back exactly.
func TestPreallocatedWriteOnFullPool(t *testing.T) {
	c := startCluster(t, cluster.Config{Drives: 12, Scheme: "4+2", Unit: 64 << 10, DriveSize: 8 << 20})
	mnt := mount(t, c)
	res := filepath.Join(mnt, "reserved")
	f, err := os.Create(res)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// 8 stripes of 4 x 64 KiB: a drive holds at most one fragment (68 KiB)
	// of each, 544 KiB in all, within the 688 KiB (a quarter of the room
	// above the limit) its 8 MiB take beyond the limit for replacements
	// (the collector, which frees old generations, does not run here).
	const size = 2 << 20
	if err := unix.Fallocate(int(f.Fd()), 0, 0, size); err != nil {
		t.Fatalf("preallocate %d bytes: %v", size, err)
	}
	fillFromElsewhere(t, c)
	if _, err := os.Stat(filepath.Join(mnt, "elsewhere0")); err != nil {
		t.Fatalf("the pool was not filled from elsewhere: %v", err)
	}
	data := make([]byte, size)
	rand.New(rand.NewSource(2)).Read(data)
	if _, err := unix.Pwrite(int(f.Fd()), data, 0); err != nil {
		t.Fatalf("write %d bytes over the preallocated range of a full pool: %v", size, err)
	}
	if err := f.Sync(); err != nil {
		t.Fatalf("fsync after writing the preallocated range of a full pool: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	got, err := os.ReadFile(res)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes, %v (equal %v)", len(got), err, bytes.Equal(got, data))
	}
}
