package fusefs

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// mmapCmpEnv makes the test binary a child that maps a file of the mount
// and compares it with a reference file: "MOUNTED|REFERENCE".
const mmapCmpEnv = "POOLFS_FUSEFS_MMAPCMP"

// checkMmap maps path (a file of a mount this test process serves) in a
// child process and fails t unless the mapping holds exactly want. The
// mapping must not be touched by this process: a page fault on it waits
// for a READ that this process serves, and holds memory-map locks that
// this process's runtime may need in order to serve it.
func checkMmap(t *testing.T, path string, want []byte) {
	t.Helper()
	ref := filepath.Join(t.TempDir(), "want")
	if err := os.WriteFile(ref, want, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0])
	cmd.Env = append(os.Environ(), mmapCmpEnv+"="+path+"|"+ref)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("memory map of %s: %v: %s", path, err, out)
	}
}

// mmapCmpMain is the child of checkMmap.
func mmapCmpMain() int {
	path, ref, _ := strings.Cut(os.Getenv(mmapCmpEnv), "|")
	want, err := os.ReadFile(ref)
	if err != nil {
		fmt.Println(err)
		return 2
	}
	f, err := os.Open(path)
	if err != nil {
		fmt.Println(err)
		return 2
	}
	defer f.Close()
	m, err := unix.Mmap(int(f.Fd()), 0, len(want), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		fmt.Println("mmap:", err)
		return 2
	}
	defer unix.Munmap(m)
	if !bytes.Equal(m, want) {
		fmt.Println("the memory map differs from the file's bytes")
		return 1
	}
	return 0
}
