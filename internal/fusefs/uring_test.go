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

// TestURingTransport: with io_uring requested on a kernel that has it, the
// mount serves over it, and processes on every CPU (each CPU has its own
// queue) write, read back byte for byte, create and remove through it.
func TestURingTransport(t *testing.T) {
	if !testURing() {
		t.Skip("POOLFS_TEST_URING=0: this run covers /dev/fuse")
	}
	if err := fuseuring.Enable(); err != nil {
		t.Skipf("no FUSE over io_uring here: %v", err)
	}
	c := startCluster(t, cluster0())
	dir, srv := mountSrv(t, c)
	if !srv.URing() {
		t.Fatal("mounted with URing on a kernel that allows it, but requests come over /dev/fuse")
	}
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
