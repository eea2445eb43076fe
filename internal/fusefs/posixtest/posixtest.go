package posixtest

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// Options tune Run.
type Options struct {
	// BigDir is the number of entries of the large-directory check
	// (default 100,000).
	BigDir int
	// Populate, if set, creates the entries of the large directory
	// (BigDirEntry(i) for i < n) by other means than system calls on the
	// mount, e.g. through the metadata service directly: creating 100,000
	// files one system call at a time is slow under the race detector, and
	// the check is about listing them.
	Populate func(dir string, n int) error
	// Only, if set, selects the checks to run by name (for running a part
	// of the table on more kinds of mount).
	Only func(name string) bool
}

// check is one named check; it runs in its own empty directory.
type check struct {
	name string
	fn   func(t *testing.T, dir string)
}

// Run runs every check in a fresh subdirectory of root.
func Run(t *testing.T, root string, o Options) {
	if o.BigDir == 0 {
		o.BigDir = 100000
	}
	old := syscall.Umask(0) // modes in the table are exact
	defer syscall.Umask(old)
	var checks []check
	for _, cs := range [][]check{fileChecks(), coherenceChecks(), nsChecks(), attrChecks(), timeChecks(), setidChecks()} {
		checks = append(checks, cs...)
	}
	checks = append(checks, bigDirCheck(o.BigDir, o.Populate))
	for _, c := range checks {
		if o.Only != nil && !o.Only(c.name) {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(root, c.name)
			if err := os.Mkdir(dir, 0o777); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, 0o777); err != nil {
				t.Fatal(err)
			}
			c.fn(t, dir)
		})
	}
}

// errnoOf returns the errno in err (0 for nil, -1 if there is none).
func errnoOf(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return syscall.Errno(^uintptr(0))
}

// want fails unless err carries errno (0: no error).
func want(t *testing.T, what string, err error, errno syscall.Errno) {
	t.Helper()
	if got := errnoOf(err); got != errno {
		t.Fatalf("%s: got %v (%v), want %v", what, got, err, errno)
	}
}

// wantOneOf fails unless err carries one of errnos.
func wantOneOf(t *testing.T, what string, err error, errnos ...syscall.Errno) {
	t.Helper()
	got := errnoOf(err)
	for _, e := range errnos {
		if got == e {
			return
		}
	}
	t.Fatalf("%s: got %v (%v), want one of %v", what, got, err, errnos)
}

func ok(t *testing.T, what string, err error) {
	t.Helper()
	want(t, what, err, 0)
}

// Nobody is the uid and gid of the permission checks.
const Nobody = 65534

// asUser runs fn on a locked OS thread whose effective uid and gid are
// uid/gid and that has no supplementary groups. The thread is discarded
// afterwards.
func asUser(uid, gid int, fn func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		if _, _, e := syscall.RawSyscall(unix.SYS_SETGROUPS, 0, 0, 0); e != 0 {
			done <- e
			return
		}
		if _, _, e := syscall.RawSyscall(unix.SYS_SETRESGID, ^uintptr(0), uintptr(gid), ^uintptr(0)); e != 0 {
			done <- e
			return
		}
		if _, _, e := syscall.RawSyscall(unix.SYS_SETRESUID, ^uintptr(0), uintptr(uid), ^uintptr(0)); e != 0 {
			done <- e
			return
		}
		done <- fn()
	}()
	return <-done
}

func stat(t *testing.T, p string) *syscall.Stat_t {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		t.Fatalf("stat %s: %v", p, err)
	}
	return &st
}

func writeFile(t *testing.T, p string, data []byte) {
	t.Helper()
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
