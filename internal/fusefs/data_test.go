package fusefs

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"poolfs/internal/client"
	"poolfs/internal/cluster"
)

func cluster0() cluster.Config { return cluster.Config{} }

func errorIs(err error, errno syscall.Errno) bool { return errors.Is(err, errno) }

// TestLargeFile copies 64 MiB in and out through the mount, like cp.
func TestLargeFile(t *testing.T) {
	c := startCluster(t, cluster0())
	mnt := mount(t, c)
	data := make([]byte, 64<<20+12345)
	rand.Read(data)
	p := filepath.Join(mnt, "big")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.CopyBuffer(f, bytes.NewReader(data), make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(p)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes (want %d), equal %v, err %v", len(got), len(data), bytes.Equal(got, data), err)
	}
	// A second mount (another client) reads the same bytes.
	got, err = os.ReadFile(filepath.Join(mount(t, c), "big"))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("other mount: %d bytes, err %v", len(got), err)
	}
}

// TestTwoMounts checks close-to-open between two mounts of one cluster.
func TestTwoMounts(t *testing.T) {
	c := startCluster(t, cluster0())
	a, b := mount(t, c), mount(t, c)
	pa, pb := filepath.Join(a, "f"), filepath.Join(b, "f")
	for round, size := range []int{5000, 700000, 300} {
		data := make([]byte, size)
		rand.Read(data)
		if err := os.WriteFile(pa, data, 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(pb)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("round %d: other mount read %d bytes (want %d), err %v", round, len(got), len(data), err)
		}
		if st, err := os.Stat(pb); err != nil || st.Size() != int64(size) {
			t.Fatalf("round %d: stat on other mount: %v %v", round, st.Size(), err)
		}
	}
	// Sparse file written on b reads as zeros with data on a.
	f, _ := os.Create(filepath.Join(b, "sparse"))
	f.WriteAt([]byte("tail"), 5<<20)
	f.Close()
	got, err := os.ReadFile(filepath.Join(a, "sparse"))
	if err != nil || len(got) != 5<<20+4 || !bytes.Equal(got[:5<<20], make([]byte, 5<<20)) || string(got[5<<20:]) != "tail" {
		t.Fatalf("sparse: %d bytes, %v", len(got), err)
	}
	// Names made on one mount are visible on the other at once.
	if err := os.Mkdir(filepath.Join(a, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(b, "d")); err != nil {
		t.Fatal(err)
	}
}

// TestOneFilePerInode: two descriptors of one mount see each other's
// writes before any close.
func TestOneFilePerInode(t *testing.T) {
	c := startCluster(t, cluster0())
	p := filepath.Join(mount(t, c), "f")
	w, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	r, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	w.WriteAt([]byte("written, not flushed"), 1000)
	buf := make([]byte, 20)
	if n, _ := r.ReadAt(buf, 1000); string(buf[:n]) != "written, not flushed" {
		t.Fatalf("other descriptor read %q", buf[:n])
	}
}

// TestENOSPC fills a tiny pool: the write or the close reports ENOSPC and
// the file system stays usable.
func TestENOSPC(t *testing.T) {
	c := startCluster(t, cluster.Config{Drives: 7, Scheme: "4+2", Unit: 64 << 10, DriveSize: 8 << 20})
	mnt := mount(t, c)
	f, err := os.Create(filepath.Join(mnt, "fill"))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	var werr error
	filled := 0
	for i := 0; i < 128 && werr == nil; i++ {
		var n int
		n, werr = f.Write(buf)
		filled += n
	}
	if werr == nil {
		werr = f.Sync()
	}
	f.Close()
	if !errorIs(werr, syscall.ENOSPC) {
		t.Fatalf("filling the pool: %v, want ENOSPC", werr)
	}
	if err := os.Remove(filepath.Join(mnt, "fill")); err != nil {
		t.Fatal(err)
	}
	// The space comes back when the kernel's release of the closed file
	// reaches the mount, which FUSE sends after close(2) returned: within
	// milliseconds, not at once.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if err = os.WriteFile(filepath.Join(mnt, "small"), []byte("ok"), 0o644); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("5 s after removing the file that filled the pool: %v", err)
	}
	if got, err := os.ReadFile(filepath.Join(mnt, "small")); err != nil || string(got) != "ok" {
		t.Fatalf("read back %q, %v", got, err)
	}
	// And a file of half what the first took, at once: the mount gave
	// back what the failed file's buffers held when it was closed, and a
	// write that finds a drive still full of the removed file's fragments
	// waits for the collector.
	half := bytes.Repeat([]byte("0123456789abcdef"), filled/2/16)
	// Once the removed file's release has reached the mount (its usage
	// leaves the pool's: df shows it, the collector may not have run).
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		var st syscall.Statfs_t
		if err := syscall.Statfs(mnt, &st); err != nil {
			t.Fatal(err)
		}
		if (st.Blocks-st.Bfree)*uint64(st.Bsize) < uint64(filled/4) {
			break
		}
	}
	// Its fragments leave the drives when the collector comes by (the
	// pool's limit counts them as used until then), at its next pass: a
	// writer that finds the pool full waits for it if its queue holds
	// fragments, and may still come too early.
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if err = os.WriteFile(filepath.Join(mnt, "half"), half, 0o644); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatalf("a file of %d bytes after removing one of %d that filled the pool: %v", len(half), filled, err)
	}
	if got, err := os.ReadFile(filepath.Join(mnt, "half")); err != nil || !bytes.Equal(got, half) {
		d := 0
		for d < min(len(got), len(half)) && got[d] == half[d] {
			d++
		}
		t.Fatalf("read back %d bytes, %v; wrote %d; first difference at %d: %q", len(got), err, len(half), d, got[d:min(d+32, len(got))])
	}
}

// TestWriteErrorEveryDescriptor: when writes a descriptor made are lost
// in the background (the pool filled after they were accepted), the one
// that made them hears of it, and so does every other descriptor of the
// file open at the time, at close, although it wrote nothing (as Linux
// reports a page-cache writeback error to every open file description). A
// descriptor opened after the loss is not told.
func TestWriteErrorEveryDescriptor(t *testing.T) {
	c := startCluster(t, cluster.Config{Drives: 7, Scheme: "4+2", Unit: 64 << 10, DriveSize: 8 << 20})
	mnt := mount(t, c)
	p := filepath.Join(mnt, "fill")
	a, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	// A first write: the mount learns how much room the pool has.
	if _, err := a.WriteAt([]byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	if err := a.Sync(); err != nil {
		t.Fatal(err)
	}
	// Another client fills the pool meanwhile, so the mount accepts the
	// next write on what it knew, and its stripes fail in the background.
	fillFromElsewhere(t, c)
	_, werr := a.WriteAt(make([]byte, 1<<20), 1<<20) // whole stripes: written in the background
	serr := a.Sync()                                 // waits for the writes still in flight
	if !errorIs(werr, syscall.ENOSPC) && !errorIs(serr, syscall.ENOSPC) {
		t.Fatalf("a's writes into the filled pool: write %v, fsync %v; want ENOSPC", werr, serr)
	}
	later, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); !errorIs(err, syscall.ENOSPC) {
		t.Fatalf("close of b, open while a's writes were lost: %v, want ENOSPC", err)
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := later.Close(); err != nil {
		t.Fatalf("close of a descriptor opened after the loss: %v, want no error", err)
	}
}

// fillFromElsewhere fills c's pool through a client of its own with files
// of falling size, until a 64 KiB one is refused. The pool's limit follows
// what the drives can take and may rise once a refused write's own
// fragments are gone, so it fills again after the limit is set anew, until
// a round adds nothing: then the pool is full and stays so.
func fillFromElsewhere(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	ctx := context.Background()
	conn, err := cluster.Connect(ctx, c.Config.Dir, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	n := 0
	for round := 0; ; round++ {
		if round == 10 {
			t.Fatalf("the pool was still taking files after %d rounds of filling", round)
		}
		added := false
		for size := 1 << 20; size >= 64<<10; {
			data := make([]byte, size)
			_, err := conn.Client.Put(ctx, fmt.Sprintf("/elsewhere%d", n), bytes.NewReader(data), client.PutOptions{Size: int64(size)})
			if errors.Is(err, client.ErrPoolFull) {
				size /= 4
				continue
			} else if err != nil {
				t.Fatal(err)
			}
			n, added = n+1, true
		}
		if !added {
			return
		}
		c.Mgmt.UpdatePoolLimits(ctx)
	}
}

// Shared-file writers: child processes (this test binary, re-executed)
// write disjoint ranges of one file through two mounts.

const writerEnv = "POOLFS_FUSEFS_WRITER" // path|index|writers|xfer|count|strided

// pattern is the byte every writer puts at offset o.
func pattern(o int64) byte { return byte((o * 2654435761) >> 13) }

// writerMain is the child: it writes its ranges and exits 0, or prints the
// error and exits 1.
func writerMain() int {
	a := strings.Split(os.Getenv(writerEnv), "|")
	idx, _ := strconv.Atoi(a[1])
	n, _ := strconv.Atoi(a[2])
	xfer, _ := strconv.Atoi(a[3])
	count, _ := strconv.Atoi(a[4])
	f, err := os.OpenFile(a[0], os.O_WRONLY, 0)
	if err != nil {
		fmt.Println(err)
		return 1
	}
	buf := make([]byte, xfer)
	for k := 0; k < count; k++ {
		off := int64(idx*count+k) * int64(xfer) // segmented
		if a[5] == "strided" {
			off = int64(k*n+idx) * int64(xfer)
		}
		for i := range buf {
			buf[i] = pattern(off + int64(i))
		}
		if _, err := f.WriteAt(buf, off); err != nil {
			fmt.Println(err)
			return 1
		}
	}
	if err := f.Close(); err != nil {
		fmt.Println(err)
		return 1
	}
	return 0
}

func TestSharedFileWriters(t *testing.T) {
	c := startCluster(t, cluster0()) // 4+2, unit 64 KiB: stripes of 256 KiB
	mnts := []string{mount(t, c), mount(t, c)}
	const writers = 4
	cases := []struct {
		xfer, count int
		strided     bool
	}{
		{1000, 200, true},
		{1 << 10, 64, false},
		{100003, 8, true},
		{1<<20 + 7, 3, false},
		{4 << 20, 2, true},
	}
	for _, tc := range cases {
		name := fmt.Sprintf("xfer%d-segmented", tc.xfer)
		if tc.strided {
			name = fmt.Sprintf("xfer%d-strided", tc.xfer)
		}
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(mnts[0], name)
			if err := os.WriteFile(p, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			errs := make([]error, writers)
			for i := 0; i < writers; i++ {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					mp := filepath.Join(mnts[i%2], name)
					cmd := exec.Command(os.Args[0], "-test.run=^$")
					cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s|%d|%d|%d|%d|%s", writerEnv, mp, i, writers, tc.xfer, tc.count, map[bool]string{true: "strided", false: "segmented"}[tc.strided]))
					if out, err := cmd.CombinedOutput(); err != nil {
						errs[i] = fmt.Errorf("writer %d: %v: %s", i, err, out)
					}
				}(i)
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			size := int64(writers * tc.count * tc.xfer)
			for _, m := range mnts {
				got, err := os.ReadFile(filepath.Join(m, name))
				if err != nil || int64(len(got)) != size {
					t.Fatalf("%s: read %d bytes, want %d: %v", m, len(got), size, err)
				}
				for o := range got {
					if got[o] != pattern(int64(o)) {
						t.Fatalf("%s: byte %d is %d, want %d", m, o, got[o], pattern(int64(o)))
					}
				}
			}
		})
	}
}
