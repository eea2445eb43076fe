package fusefs

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"poolfs/internal/erasure"
)

// TestSharedFileReaders: four processes' worth of descriptors read their
// own quarter of one file through the mount at once, O_DIRECT in requests
// of a quarter stripe (as IOR's N-to-1 read does). The mount serves them
// all from the inode's one client.File, which must tell the four streams
// apart: every byte is checked, and the File read the stripes whole (into
// its cache, with readahead) rather than a shard range per request. With
// one stream per File the readers reset each other and nearly every
// request was a range read.
func TestSharedFileReaders(t *testing.T) {
	const (
		stripe  = 4 * 64 << 10 // 4+2, 64 KiB units
		readers = 4
		part    = 16 * stripe
		xfer    = 64 << 10
	)
	c := startCluster(t, cluster0())
	dir, srv := mountSrv(t, c)
	p := filepath.Join(dir, "shared")
	data := make([]byte, readers*part)
	for i := range data {
		data[i] = byte(rand.Uint32())
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	var fds []*os.File
	for range readers {
		f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_DIRECT, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		fds = append(fds, f)
	}
	got := make([]byte, len(data))
	var wg sync.WaitGroup
	errs := make(chan error, readers)
	for r, f := range fds {
		wg.Go(func() {
			buf := erasure.AlignedBuffer(xfer)
			for off := r * part; off < (r+1)*part; off += xfer {
				if n, err := f.ReadAt(buf, int64(off)); err != nil || n != xfer {
					errs <- fmt.Errorf("reader %d at %d: %d bytes, %v", r, off, n, err)
					return
				}
				copy(got[off:], buf)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("content differs")
	}
	srv.fs.mu.Lock()
	if len(srv.fs.mu.files) != 1 {
		srv.fs.mu.Unlock()
		t.Fatalf("%d files open in the mount, want the one of the shared file", len(srv.fs.mu.files))
	}
	var whole, ranges int64
	for _, of := range srv.fs.mu.files {
		whole, ranges = of.f.ReadCounts()
	}
	srv.fs.mu.Unlock()
	t.Logf("%d stripes read whole, %d shard ranges", whole, ranges)
	if stripes := int64(len(data) / stripe); whole < stripes || ranges > 2*readers {
		t.Errorf("read as %d whole stripes and %d shard ranges; want each of the %d stripes read whole and at most %d range reads (two per reader)",
			whole, ranges, stripes, 2*readers)
	}
}
