package fusefs

import (
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// TestOpenFlags: which descriptors bypass the page cache and which skip
// the FLUSH at close, with and without the kernel's mmap of direct files.
func TestOpenFlags(t *testing.T) {
	const direct = fuse.FOPEN_DIRECT_IO | fuse.FOPEN_PARALLEL_DIRECT_WRITES
	for _, tc := range []struct {
		flags      uint32
		directMmap bool
		want       uint32
	}{
		{syscall.O_RDONLY, true, fuse.FOPEN_NOFLUSH},
		{syscall.O_RDONLY, false, fuse.FOPEN_NOFLUSH},
		{syscall.O_RDONLY | syscall.O_DIRECT, false, fuse.FOPEN_NOFLUSH | direct},
		{syscall.O_WRONLY, true, direct},
		{syscall.O_RDWR | syscall.O_APPEND, true, direct},
		{syscall.O_WRONLY, false, 0},
		{syscall.O_RDWR, false, 0},
		{syscall.O_RDWR | syscall.O_DIRECT, false, direct},
	} {
		fsys := &FS{}
		fsys.directWrites.Store(tc.directMmap)
		if got := fsys.openFlags(tc.flags); got != tc.want {
			t.Errorf("openFlags(%#o), direct mmap %v: %#x, want %#x", tc.flags, tc.directMmap, got, tc.want)
		}
	}
}
