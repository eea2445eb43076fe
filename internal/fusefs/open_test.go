package fusefs

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// TestOpenFlags: which descriptors bypass the page cache and which skip
// the FLUSH at close, with and without the kernel's mmap of direct files.
func TestOpenFlags(t *testing.T) {
	const direct = fuse.FOPEN_DIRECT_IO | fuse.FOPEN_PARALLEL_DIRECT_WRITES
	for _, tc := range []struct {
		flags       uint32
		directMmap  bool
		directReads bool // Options.DirectReads (only with directMmap)
		want        uint32
	}{
		{syscall.O_RDONLY, true, false, fuse.FOPEN_NOFLUSH},
		{syscall.O_RDONLY, false, false, fuse.FOPEN_NOFLUSH},
		{syscall.O_RDONLY | syscall.O_DIRECT, false, false, fuse.FOPEN_NOFLUSH | direct},
		{syscall.O_WRONLY, true, false, direct},
		{syscall.O_RDWR | syscall.O_APPEND, true, false, direct},
		{syscall.O_WRONLY, false, false, 0},
		{syscall.O_RDWR, false, false, 0},
		{syscall.O_RDWR | syscall.O_DIRECT, false, false, direct},
		{syscall.O_RDONLY, true, true, fuse.FOPEN_NOFLUSH | direct},
		{syscall.O_RDWR, true, true, direct},
	} {
		fsys := &FS{}
		fsys.directWrites.Store(tc.directMmap)
		fsys.directReads.Store(tc.directReads)
		if got := fsys.openFlags(tc.flags); got != tc.want {
			t.Errorf("openFlags(%#o), direct mmap %v, direct reads %v: %#x, want %#x", tc.flags, tc.directMmap, tc.directReads, got, tc.want)
		}
	}
}

// TestDirectReads: with Options.DirectReads a plain read-only descriptor
// reads every byte right without filling the page cache (a default mount
// fills it: the control), and a memory map of the file still reads right.
func TestDirectReads(t *testing.T) {
	c := startCluster(t, cluster0())
	want := make([]byte, 4<<20+777)
	rand.Read(want)
	for _, direct := range []bool{false, true} {
		dir, _ := mountWith(t, c, Options{AllowOther: true, URing: testURing(), DirectReads: direct})
		p := filepath.Join(dir, fmt.Sprint("f", direct))
		if err := os.WriteFile(p, want, 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(bufio.NewReaderSize(f, 64<<10))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("direct reads %v: read %d bytes (want %d), equal %v, %v", direct, len(got), len(want), bytes.Equal(got, want), err)
		}
		cached := resident(t, f, 0, int64(len(want)))
		if direct != (cached == 0) {
			t.Errorf("direct reads %v: %d pages of the file in the page cache after reading it", direct, cached)
		}
		f.Close()
		checkMmap(t, p, want)
	}
}
