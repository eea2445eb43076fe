package fusefs

import (
	"bytes"
	"crypto/rand"
	"os"
	"path/filepath"
	"testing"
)

// TestCloseToOpenWhileOpen: a mount shares one File per inode among its
// descriptors. An open on mount b while another descriptor of b still
// holds the file must see what mount a committed since (close-to-open),
// size and bytes, not what b's File read when it was first opened.
// (Before, it saw the old size and bytes for as long as any descriptor of
// b held the file: `poolfs bench fsx --other` found it, reading zeros
// where a had written, after a's close.)
func TestCloseToOpenWhileOpen(t *testing.T) {
	c := startCluster(t, cluster0())
	a, b := mount(t, c), mount(t, c)
	pa, pb := filepath.Join(a, "f"), filepath.Join(b, "f")
	first := make([]byte, 100<<10)
	rand.Read(first)
	if err := os.WriteFile(pa, first, 0o644); err != nil {
		t.Fatal(err)
	}
	holder, err := os.Open(pb) // b's File, kept open
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	got := make([]byte, len(first))
	if _, err := holder.ReadAt(got, 0); err != nil || !bytes.Equal(got, first) {
		t.Fatalf("first read on b: %v", err)
	}
	for round, size := range []int{700 << 10, 50 << 10, 300 << 10} {
		data := make([]byte, size)
		rand.Read(data)
		if err := os.WriteFile(pa, data, 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(pb)
		if err != nil {
			t.Fatal(err)
		}
		st, err := f.Stat()
		if err != nil {
			t.Fatal(err)
		}
		back := make([]byte, size+1)
		n, _ := f.ReadAt(back, 0)
		f.Close()
		if st.Size() != int64(size) || n != size || !bytes.Equal(back[:n], data) {
			t.Fatalf("round %d: an open on b while b holds the file: size %d, read %d bytes (equal: %v), want %d",
				round, st.Size(), n, bytes.Equal(back[:min(n, size)], data[:min(n, size)]), size)
		}
	}
}
