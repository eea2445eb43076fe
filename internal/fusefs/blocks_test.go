package fusefs

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestBlocks: st_blocks (what du shows) is the data bytes of the stored
// stripes: about one stripe for a large sparse file with one stripe
// written, the size for a dense file, and less after a truncate.
func TestBlocks(t *testing.T) {
	c := startCluster(t, cluster0())
	mnt := mount(t, c)
	const sb = 4 * 64 << 10 // the test cluster's stripe: 4+2, 64 KiB units
	used := func(p string) int64 {
		t.Helper()
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		return st.Blocks * 512
	}

	sparse := filepath.Join(mnt, "sparse")
	f, err := os.Create(sparse)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1000 * sb); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(bytes.Repeat([]byte{1}, sb), 500*sb); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if u := used(sparse); u != sb {
		t.Errorf("sparse file of %d bytes with one stripe written: %d bytes used, want %d", 1000*sb, u, sb)
	}

	dense := filepath.Join(mnt, "dense")
	size := int64(4*sb + 1000)
	if err := os.WriteFile(dense, bytes.Repeat([]byte{2}, int(size)), 0o644); err != nil {
		t.Fatal(err)
	}
	if u := used(dense); u < size || u >= size+512 {
		t.Errorf("dense file of %d bytes: %d bytes used", size, u)
	}
	if err := os.Truncate(dense, sb+100); err != nil {
		t.Fatal(err)
	}
	if u := used(dense); u < sb+100 || u >= sb+100+512 {
		t.Errorf("truncated to %d bytes: %d bytes used", sb+100, u)
	}
}
