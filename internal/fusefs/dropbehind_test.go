package fusefs

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// resident returns how many pages of [off, off+n) of the open file f are
// in the page cache (mincore of a mapping that is never touched, so no
// page is faulted in).
func resident(t *testing.T, f *os.File, off, n int64) int {
	t.Helper()
	m, err := unix.Mmap(int(f.Fd()), off, int(n), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	vec := make([]byte, (n+4095)/4096)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatal("mincore:", errno)
	}
	c := 0
	for _, v := range vec {
		c += int(v & 1)
	}
	return c
}

// TestDropBehind: a sequential reader leaves only a window of page cache
// behind it and reads every byte right; a reader going back afterwards
// reads right too.
func TestDropBehind(t *testing.T) {
	c := startCluster(t, cluster0())
	mnt := mount(t, c)
	p := filepath.Join(mnt, "big")
	const size = dropBehindKeep + 3*dropBehindStep
	want := make([]byte, size)
	for i := range want {
		want[i] = pattern(int64(i))
	}
	if err := os.WriteFile(p, want, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for off := int64(0); off < size; off += int64(len(buf)) {
		if _, err := io.ReadFull(f, buf); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf, want[off:off+int64(len(buf))]) {
			t.Fatalf("sequential read differs at %d", off)
		}
	}
	// The first dropBehindStep bytes are far behind: dropped (the
	// notification is sent in the background).
	var n int
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if n = resident(t, f, 0, dropBehindStep); n == 0 {
			break
		}
	}
	if n != 0 {
		t.Fatalf("%d pages of the first %d MiB still cached after reading %d MiB", n, dropBehindStep>>20, size>>20)
	}
	if n := resident(t, f, size-dropBehindStep, dropBehindStep); n == 0 {
		t.Fatalf("nothing cached of the last %d MiB read", dropBehindStep>>20)
	}
	// Going back (which stops drop-behind for the file) reads the right
	// bytes.
	got := make([]byte, 3<<20)
	if _, err := f.ReadAt(got, 5<<20); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want[5<<20:8<<20]) {
		t.Fatal("read after going back differs")
	}
}
