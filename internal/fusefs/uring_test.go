package fusefs

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"poolfs/internal/fuseuring"
)

// uringMount mounts a new cluster over io_uring, or skips the test where
// this run covers /dev/fuse or the kernel has no FUSE over io_uring.
func uringMount(t *testing.T) (string, *Server) {
	t.Helper()
	if !testURing() {
		t.Skip("POOLFS_TEST_URING=0: this run covers /dev/fuse")
	}
	if err := fuseuring.Enable(); err != nil {
		t.Skipf("no FUSE over io_uring here: %v", err)
	}
	dir, srv := mountSrv(t, startCluster(t, cluster0()))
	if !srv.URing() {
		t.Fatal("mounted with URing on a kernel that allows it, but requests come over /dev/fuse")
	}
	return dir, srv
}

// TestURingTransport: with io_uring requested on a kernel that has it, the
// mount serves over it, and processes on every CPU (each CPU has its own
// queue) write, read back byte for byte, create and remove through it.
func TestURingTransport(t *testing.T) {
	dir, _ := uringMount(t)
	var wg sync.WaitGroup
	errs := make(chan error, 2*runtime.NumCPU())
	for cpu := 0; cpu < runtime.NumCPU(); cpu++ {
		for w := 0; w < 2; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				var set unix.CPUSet
				set.Set(cpu)
				if err := unix.SchedSetaffinity(0, &set); err != nil {
					errs <- err
					return
				}
				errs <- churn(filepath.Join(dir, fmt.Sprintf("c%dw%d", cpu, w)))
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// churn writes a 3 MiB file (large requests) in dir, reads it back, and
// creates, stats and removes 100 files.
func churn(dir string) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	data := make([]byte, 3<<20+12345)
	rand.Read(data)
	p := filepath.Join(dir, "big")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		return err
	}
	got, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	if !bytes.Equal(got, data) {
		return fmt.Errorf("%s: read back %d bytes that differ from the %d written", p, len(got), len(data))
	}
	for i := 0; i < 100; i++ {
		f := filepath.Join(dir, fmt.Sprint(i))
		if err := os.WriteFile(f, []byte(f), 0o600); err != nil {
			return err
		}
		if st, err := os.Stat(f); err != nil || st.Size() != int64(len(f)) {
			return fmt.Errorf("stat %s: %v, size want %d", f, err, len(f))
		}
	}
	for i := 0; i < 100; i++ {
		if err := os.Remove(filepath.Join(dir, fmt.Sprint(i))); err != nil {
			return err
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) != 1 {
		return fmt.Errorf("%s after removes: %d entries, %v; want only big", dir, len(ents), err)
	}
	return nil
}

// TestURingSmallRequests: 4 KiB writes, and 4 KiB reads buffered and with
// O_DIRECT, go through the queues' threads when they need not wait (most
// of them) and to goroutines when they would (the first reads of a
// stripe); either way every byte comes back as written.
func TestURingSmallRequests(t *testing.T) {
	dir, srv := uringMount(t)
	const bs = 4096
	data := make([]byte, 6<<20+bs/2)
	rand.Read(data)
	p := filepath.Join(dir, "small")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	for off := 0; off < len(data); off += bs {
		if _, err := f.Write(data[off:min(off+bs, len(data))]); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	wrote, _ := srv.Tried()
	if wrote < uint64(len(data)/bs/2) {
		t.Errorf("%d of %d writes served on the queues' threads; want most", wrote, len(data)/bs)
	}
	// O_DIRECT wants an aligned buffer: one page of its own.
	buf, err := unix.Mmap(-1, 0, bs, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(buf)
	for _, flags := range []int{0, unix.O_DIRECT} {
		fd, err := unix.Open(p, unix.O_RDONLY|flags, 0)
		if err != nil {
			t.Fatal(err)
		}
		var got []byte
		for {
			n, err := unix.Read(fd, buf)
			if err != nil {
				t.Fatalf("read (flags %#x) at %d: %v", flags, len(got), err)
			}
			if n == 0 {
				break
			}
			got = append(got, buf[:n]...)
		}
		unix.Close(fd)
		if !bytes.Equal(got, data) {
			t.Fatalf("read back (flags %#x) %d bytes that differ from the %d written", flags, len(got), len(data))
		}
	}
	inline, handed := srv.Tried()
	t.Logf("served inline %d, handed to goroutines %d", inline, handed)
	if inline-wrote < uint64(len(data)/bs/2) || handed == 0 {
		t.Errorf("reads: %d served inline, %d handed on in all; want most of the %d O_DIRECT reads inline, and the first of a stripe handed on",
			inline-wrote, handed, len(data)/bs)
	}
}
