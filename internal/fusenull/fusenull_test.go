package fusenull

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestNullFS(t *testing.T) {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no /dev/fuse: %v", err)
		}
		t.Skip("no /dev/fuse")
	}
	for _, direct := range []bool{false, true} {
		dir := t.TempDir()
		srv, err := Mount(dir, Options{DirectIO: direct, ParallelIO: direct})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Unmount() })
		p := filepath.Join(dir, "f")
		if err := os.WriteFile(p, bytes.Repeat([]byte{7}, 3<<20), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 3<<20 || !bytes.Equal(got, make([]byte, 3<<20)) {
			t.Fatalf("direct=%v: read %d bytes, want 3 MiB of zeros", direct, len(got))
		}
		if err := srv.Unmount(); err != nil {
			t.Fatal(err)
		}
	}
}

// The loopback mount passes the namespace and data through to its backing
// directory.
func TestLoopback(t *testing.T) {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no /dev/fuse: %v", err)
		}
		t.Skip("no /dev/fuse")
	}
	dir, backing := t.TempDir(), t.TempDir()
	srv, err := MountLoopback(dir, backing)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Unmount() })
	data := []byte("through the loopback")
	if err := os.WriteFile(filepath.Join(dir, "f"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(backing, "f")); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("backing file: %q, %v", got, err)
	}
	if err := os.Remove(filepath.Join(dir, "f")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(backing, "f")); !os.IsNotExist(err) {
		t.Fatalf("backing file after remove: %v", err)
	}
	if err := srv.Unmount(); err != nil {
		t.Fatal(err)
	}
}
