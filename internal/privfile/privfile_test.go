package privfile

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestWrite(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	dir := t.TempDir()
	tests := []struct {
		name    string
		before  os.FileMode // 0: no file before
		content []byte
	}{
		{"new file", 0, []byte("secret\n")},
		{"replaces a world-readable file", 0o644, []byte("key")},
		{"empty", 0o600, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, tc.name)
			if tc.before != 0 {
				if err := os.WriteFile(p, []byte("old contents, longer than the new"), tc.before); err != nil {
					t.Fatal(err)
				}
			}
			if err := Write(p, tc.content); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(p)
			if err != nil || !bytes.Equal(got, tc.content) {
				t.Fatalf("read back %q, %v; want %q", got, err, tc.content)
			}
			fi, err := os.Stat(p)
			if err != nil || fi.Mode().Perm() != Mode {
				t.Fatalf("mode %v, %v; want %v", fi.Mode().Perm(), err, Mode)
			}
		})
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != len(tests) {
		t.Fatalf("directory holds %d entries (temporary files left?), %v", len(entries), err)
	}
}

// TestWriteWithFailureKeepsOld: a fill that fails leaves the old file as it
// was and no temporary file behind.
func TestWriteWithFailureKeepsOld(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := Write(p, []byte("old")); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := WriteWith(p, func(w io.Writer) error {
		w.Write([]byte("half of the n"))
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("error %v, want the fill's", err)
	}
	if got, _ := os.ReadFile(p); string(got) != "old" {
		t.Fatalf("file holds %q after a failed write, want the old contents", got)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("%d entries in the directory, want the file alone", len(entries))
	}
}
