package posixtest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// timeChecks: times set explicitly survive the flush of data written
// before them (close, fsync), as tar x, cp -p and rsync -t rely on.
func timeChecks() []check {
	at := time.Date(2001, 2, 3, 4, 5, 6, 7000, time.UTC)
	mt := time.Date(2002, 3, 4, 5, 6, 7, 8000, time.UTC)
	times := []unix.Timespec{unix.NsecToTimespec(at.UnixNano()), unix.NsecToTimespec(mt.UnixNano())}
	wantTimes := func(t *testing.T, p string) {
		t.Helper()
		st := stat(t, p)
		if st.Atim.Nano() != at.UnixNano() || st.Mtim.Nano() != mt.UnixNano() {
			t.Fatalf("%s: atime %v mtime %v, want %v %v", filepath.Base(p),
				time.Unix(0, st.Atim.Nano()).UTC(), time.Unix(0, st.Mtim.Nano()).UTC(), at, mt)
		}
	}
	// sizes: a small write, and one of several MiB (full stripes written
	// back in the background while the times are set).
	sizes := []int{100, 5<<20 + 7}
	return []check{
		{"times_futimens_before_close", func(t *testing.T, dir string) {
			for _, n := range sizes {
				p := filepath.Join(dir, "f")
				f, err := os.Create(p)
				ok(t, "create", err)
				_, err = f.Write(bytes.Repeat([]byte{'x'}, n))
				ok(t, "write", err)
				ok(t, "futimens", unix.UtimesNanoAt(int(f.Fd()), "", times, unix.AT_EMPTY_PATH))
				ok(t, "close", f.Close())
				wantTimes(t, p)
				// A write after the times makes mtime now again.
				f, err = os.OpenFile(p, os.O_WRONLY, 0)
				ok(t, "open", err)
				ok(t, "futimens", unix.UtimesNanoAt(int(f.Fd()), "", times, unix.AT_EMPTY_PATH))
				_, err = f.Write([]byte("y"))
				ok(t, "write", err)
				ok(t, "close", f.Close())
				if st := stat(t, p); st.Mtim.Nano() == mt.UnixNano() {
					t.Fatal("a write after futimens kept the old mtime")
				}
			}
		}},
		{"times_utimensat_while_open", func(t *testing.T, dir string) {
			for _, n := range sizes {
				p := filepath.Join(dir, "f")
				f, err := os.Create(p)
				ok(t, "create", err)
				_, err = f.Write(bytes.Repeat([]byte{'x'}, n))
				ok(t, "write", err)
				ok(t, "utimensat", unix.UtimesNanoAt(unix.AT_FDCWD, p, times, 0))
				ok(t, "fsync", f.Sync())
				wantTimes(t, p)
				ok(t, "close", f.Close())
				wantTimes(t, p)
			}
		}},
		{"times_cp_p_rsync_tar", func(t *testing.T, dir string) {
			src := filepath.Join(t.TempDir(), "tree")
			names := []string{"a", "d/b", "d/e/c", "big"}
			for i, name := range names {
				p := filepath.Join(src, name)
				ok(t, "mkdir", os.MkdirAll(filepath.Dir(p), 0o755))
				data := bytes.Repeat([]byte{byte('a' + i)}, 1000*(i+1))
				if name == "big" {
					data = bytes.Repeat([]byte{'b'}, 3<<20)
				}
				writeFile(t, p, data)
				ok(t, "utimes", unix.UtimesNanoAt(unix.AT_FDCWD, p, times, 0))
			}
			check := func(root string) {
				t.Helper()
				for _, name := range names {
					wantTimes(t, filepath.Join(root, name))
				}
			}
			if out, err := exec.Command("cp", "-rp", src, filepath.Join(dir, "cp")).CombinedOutput(); err != nil {
				t.Fatalf("cp -p: %v: %s", err, out)
			}
			check(filepath.Join(dir, "cp"))
			if _, err := exec.LookPath("rsync"); err == nil {
				if out, err := exec.Command("rsync", "-rt", src+"/", filepath.Join(dir, "rsync")).CombinedOutput(); err != nil {
					t.Fatalf("rsync -t: %v: %s", err, out)
				}
				for _, name := range names {
					if st := stat(t, filepath.Join(dir, "rsync", name)); st.Mtim.Nano() != mt.UnixNano() {
						t.Fatalf("rsync -t: %s: mtime %v, want %v", name, time.Unix(0, st.Mtim.Nano()).UTC(), mt)
					}
				}
				// A second run finds nothing to copy: the times matched.
				out, err := exec.Command("rsync", "-rt", "--itemize-changes", src+"/", filepath.Join(dir, "rsync")).CombinedOutput()
				if err != nil || len(out) != 0 {
					t.Fatalf("second rsync -t copied again: %v: %q", err, out)
				}
			}
			if _, err := exec.LookPath("tar"); err != nil {
				t.Log("no tar: cp -p checked only")
				return
			}
			ar := filepath.Join(t.TempDir(), "tree.tar")
			if out, err := exec.Command("tar", "-cf", ar, "-C", src, ".").CombinedOutput(); err != nil {
				t.Fatalf("tar c: %v: %s", err, out)
			}
			x := filepath.Join(dir, "tar")
			ok(t, "mkdir", os.Mkdir(x, 0o755))
			if out, err := exec.Command("tar", "-xf", ar, "-C", x).CombinedOutput(); err != nil {
				t.Fatalf("tar x: %v: %s", err, out)
			}
			// tar keeps mtime to the second and sets atime to now.
			for _, name := range names {
				if st := stat(t, filepath.Join(x, name)); st.Mtim.Sec != mt.Unix() {
					t.Fatalf("tar x: %s: mtime %v, want %v", name, time.Unix(st.Mtim.Unix()).UTC(), mt.Truncate(time.Second))
				}
			}
		}},
	}
}

// setidChecks: a write or truncate by a caller without CAP_FSETID clears
// S_ISUID, and S_ISGID when the group may execute; root's writes keep them;
// a chown clears them for everyone.
func setidChecks() []check {
	return []check{
		{"setid_cleared_by_unprivileged_write", func(t *testing.T, dir string) {
			for _, c := range []struct {
				mode, want uint32
				how        string // write, truncate
			}{
				{0o6777, 0o0777, "write"}, {0o4777, 0o0777, "write"}, {0o2777, 0o0777, "write"},
				{0o2767, 0o2767, "write"}, {0o6777, 0o0777, "truncate"}, {0o4766, 0o0766, "truncate"},
			} {
				p := filepath.Join(dir, "f")
				os.Remove(p)
				writeFile(t, p, []byte("0123456789"))
				ok(t, "chown", os.Chown(p, Nobody, Nobody))
				ok(t, "chmod", syscall.Chmod(p, c.mode))
				err := asUser(Nobody, Nobody, func() error {
					fd, err := syscall.Open(p, syscall.O_WRONLY, 0)
					if err != nil {
						return err
					}
					defer syscall.Close(fd)
					if c.how == "truncate" {
						return syscall.Ftruncate(fd, 3)
					}
					_, err = syscall.Pwrite(fd, []byte("ab"), 4)
					return err
				})
				ok(t, c.how, err)
				if m := stat(t, p).Mode &^ syscall.S_IFMT; m != c.want {
					t.Errorf("%s by uid %d of a %#o file: mode %#o, want %#o", c.how, Nobody, c.mode, m, c.want)
				}
			}
		}},
		{"setid_kept_by_root_write", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "f")
			writeFile(t, p, []byte("0123456789"))
			ok(t, "chmod", syscall.Chmod(p, 0o6777))
			f, err := os.OpenFile(p, os.O_WRONLY, 0)
			ok(t, "open", err)
			_, err = f.WriteAt([]byte("ab"), 4)
			ok(t, "write", err)
			ok(t, "close", f.Close())
			if m := stat(t, p).Mode &^ syscall.S_IFMT; m != 0o6777 {
				t.Errorf("root's write: mode %#o, want 06777", m)
			}
			ok(t, "chown", os.Chown(p, Nobody, Nobody))
			if m := stat(t, p).Mode &^ syscall.S_IFMT; m != 0o0777 {
				t.Errorf("chown: mode %#o, want 0777", m)
			}
		}},
	}
}
