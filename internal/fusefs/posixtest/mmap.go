package posixtest

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// coherenceChecks cover memory mappings and what several descriptors of
// one file in one mount see of each other's writes: a local file system
// keeps them all coherent, whatever caching the mount does.
func coherenceChecks() []check {
	return []check{
		{"mmap_shared_write", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "f")
			fd, err := syscall.Open(p, syscall.O_CREAT|syscall.O_RDWR, 0o644)
			ok(t, "create", err)
			defer syscall.Close(fd)
			const size = 3*4096 + 100
			ok(t, "ftruncate", syscall.Ftruncate(fd, size))
			m, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
			ok(t, "mmap MAP_SHARED", err)
			want := pattern(size, 3)
			mapWrite(t, m, want)
			ok(t, "msync", unix.Msync(m, unix.MS_SYNC))
			// A write through the descriptor shows in the mapping.
			_, err = syscall.Pwrite(fd, []byte("written"), 4096+10)
			ok(t, "pwrite", err)
			copy(want[4096+10:], "written")
			if !bytes.Equal(mapRead(t, m), want) {
				t.Fatalf("mapping does not show the pwrite")
			}
			ok(t, "munmap", unix.Munmap(m))
			if got := readFile(t, p); !bytes.Equal(got, want) {
				t.Fatalf("read after msync: %d bytes, differ", len(got))
			}
		}},
		{"mmap_private_read", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "f")
			data := pattern(10000, 5)
			writeFile(t, p, data)
			fd, err := syscall.Open(p, syscall.O_RDONLY, 0)
			ok(t, "open", err)
			defer syscall.Close(fd)
			m, err := unix.Mmap(fd, 0, len(data), unix.PROT_READ, unix.MAP_PRIVATE)
			ok(t, "mmap MAP_PRIVATE", err)
			defer unix.Munmap(m)
			if !bytes.Equal(mapRead(t, m), data) {
				t.Fatalf("private mapping differs from the file")
			}
			_, err = unix.Mmap(fd, 0, len(data), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
			want(t, "writable shared mapping of a read-only descriptor", err, syscall.EACCES)
		}},
		{"readers_see_writes", func(t *testing.T, dir string) {
			// A reader that cached the old bytes sees what another
			// descriptor wrote, for every kind of writer.
			p := filepath.Join(dir, "f")
			old := pattern(64<<10, 1)
			writeFile(t, p, old)
			r, err := os.Open(p)
			ok(t, "open reader", err)
			defer r.Close()
			for i, flags := range []int{os.O_WRONLY, os.O_RDWR, os.O_WRONLY | syscall.O_DIRECT} {
				got := make([]byte, len(old))
				_, err := r.ReadAt(got, 0)
				ok(t, "read", err)
				w, err := os.OpenFile(p, flags, 0)
				ok(t, "open writer", err)
				buf := aligned(8192)
				copy(buf, pattern(len(buf), byte(10+i)))
				_, err = w.WriteAt(buf, 16384)
				ok(t, "write", err)
				copy(old[16384:], buf)
				// Still open: the reader must see it now, not after close.
				_, err = r.ReadAt(got, 0)
				ok(t, "read again", err)
				if !bytes.Equal(got, old) {
					t.Fatalf("writer %d (flags %#x): the open reader reads stale bytes", i, flags)
				}
				ok(t, "close writer", w.Close())
			}
		}},
	}
}

// The checks touch mappings only inside system calls (copying through a
// memfd), never with loads and stores of their own: when the file system is
// served by the test process itself, a page fault taken by Go code blocks
// that goroutine outside a system call, and a garbage collection waiting
// for it would stop the goroutines that must answer the fault.

// mapRead returns a copy of the mapping m.
func mapRead(t *testing.T, m []byte) []byte {
	t.Helper()
	fd := memfd(t)
	defer syscall.Close(fd)
	_, err := syscall.Pwrite(fd, m, 0)
	ok(t, "copy from the mapping", err)
	b := make([]byte, len(m))
	_, err = syscall.Pread(fd, b, 0)
	ok(t, "copy from the mapping", err)
	return b
}

// mapWrite copies data into the mapping m.
func mapWrite(t *testing.T, m, data []byte) {
	t.Helper()
	fd := memfd(t)
	defer syscall.Close(fd)
	_, err := syscall.Pwrite(fd, data, 0)
	ok(t, "copy to the mapping", err)
	_, err = syscall.Pread(fd, m[:len(data)], 0)
	ok(t, "copy to the mapping", err)
}

func memfd(t *testing.T) int {
	t.Helper()
	fd, err := unix.MemfdCreate("posixtest", 0)
	ok(t, "memfd_create", err)
	return fd
}

// pattern returns n bytes that differ with seed and position.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*31) ^ seed ^ byte(i>>8)
	}
	return b
}
