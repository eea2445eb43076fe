package posixtest

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// nsChecks cover names: directories, rename, links, special files.
func nsChecks() []check {
	return []check{
		{"mkdir_rmdir", func(t *testing.T, dir string) {
			d := filepath.Join(dir, "d")
			ok(t, "mkdir", os.Mkdir(d, 0o750))
			if m := stat(t, d).Mode; m != syscall.S_IFDIR|0o750 {
				t.Fatalf("mode %o", m)
			}
			want(t, "mkdir existing", syscall.Mkdir(d, 0o755), syscall.EEXIST)
			writeFile(t, filepath.Join(d, "f"), nil)
			want(t, "rmdir non-empty", syscall.Rmdir(d), syscall.ENOTEMPTY)
			want(t, "rmdir file", syscall.Rmdir(filepath.Join(d, "f")), syscall.ENOTDIR)
			want(t, "unlink dir", syscall.Unlink(d), syscall.EISDIR)
			want(t, "mkdir below file", syscall.Mkdir(filepath.Join(d, "f", "x"), 0o755), syscall.ENOTDIR)
			want(t, "rmdir missing", syscall.Rmdir(filepath.Join(dir, "nope")), syscall.ENOENT)
			want(t, "mkdir missing parent", syscall.Mkdir(filepath.Join(dir, "nope", "x"), 0o755), syscall.ENOENT)
			ok(t, "unlink", syscall.Unlink(filepath.Join(d, "f")))
			ok(t, "rmdir", syscall.Rmdir(d))
			if n := stat(t, dir).Nlink; n != 2 {
				t.Fatalf("parent nlink %d after rmdir", n)
			}
		}},
		{"nametoolong", func(t *testing.T, dir string) {
			long := strings.Repeat("n", 256)
			_, err := os.Create(filepath.Join(dir, long))
			want(t, "create 256-byte name", err, syscall.ENAMETOOLONG)
			_, err = os.Stat(filepath.Join(dir, long))
			want(t, "stat 256-byte name", err, syscall.ENAMETOOLONG)
			want(t, "mkdir 256-byte name", os.Mkdir(filepath.Join(dir, long), 0o755), syscall.ENAMETOOLONG)
			max := strings.Repeat("m", 255)
			writeFile(t, filepath.Join(dir, max), nil)
		}},
		{"rename", func(t *testing.T, dir string) {
			a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
			writeFile(t, a, []byte("A"))
			writeFile(t, b, []byte("B"))
			ok(t, "rename replace", syscall.Rename(a, b))
			if string(readFile(t, b)) != "A" {
				t.Fatal("replace: wrong content")
			}
			_, err := os.Stat(a)
			want(t, "old name", err, syscall.ENOENT)
			d1, d2 := filepath.Join(dir, "d1"), filepath.Join(dir, "d2")
			os.Mkdir(d1, 0o755)
			os.Mkdir(d2, 0o755)
			ok(t, "cross-dir", syscall.Rename(b, filepath.Join(d1, "b")))
			ok(t, "dir rename", syscall.Rename(d1, filepath.Join(d2, "d1")))
			if string(readFile(t, filepath.Join(d2, "d1", "b"))) != "A" {
				t.Fatal("moved dir lost its file")
			}
			if n := stat(t, d2).Nlink; n != 3 {
				t.Fatalf("nlink of new parent %d", n)
			}
			e := filepath.Join(dir, "e")
			os.Mkdir(e, 0o755)
			ok(t, "dir over empty dir", syscall.Rename(e, filepath.Join(dir, "d2", "d1x")))
			os.Mkdir(e, 0o755)
			wantOneOf(t, "dir over non-empty dir", syscall.Rename(e, d2), syscall.ENOTEMPTY, syscall.EEXIST) // POSIX allows either
			f := filepath.Join(dir, "f")
			writeFile(t, f, nil)
			want(t, "dir over file", syscall.Rename(e, f), syscall.ENOTDIR)
			want(t, "file over dir", syscall.Rename(f, e), syscall.EISDIR)
			want(t, "dir into itself", syscall.Rename(d2, filepath.Join(d2, "d1", "x")), syscall.EINVAL)
			want(t, "missing source", syscall.Rename(filepath.Join(dir, "nope"), f), syscall.ENOENT)
			g := filepath.Join(dir, "g")
			writeFile(t, g, []byte("G"))
			want(t, "noreplace", unix.Renameat2(unix.AT_FDCWD, f, unix.AT_FDCWD, g, unix.RENAME_NOREPLACE), syscall.EEXIST)
			ok(t, "noreplace free", unix.Renameat2(unix.AT_FDCWD, f, unix.AT_FDCWD, filepath.Join(dir, "h"), unix.RENAME_NOREPLACE))
			ok(t, "exchange", unix.Renameat2(unix.AT_FDCWD, g, unix.AT_FDCWD, e, unix.RENAME_EXCHANGE))
			if string(readFile(t, e)) != "G" || stat(t, g).Mode&syscall.S_IFMT != syscall.S_IFDIR {
				t.Fatal("exchange did not swap")
			}
			want(t, "exchange missing", unix.Renameat2(unix.AT_FDCWD, e, unix.AT_FDCWD, f, unix.RENAME_EXCHANGE), syscall.ENOENT)
			ok(t, "rename onto itself", syscall.Rename(e, e))
		}},
		{"link", func(t *testing.T, dir string) {
			a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
			writeFile(t, a, []byte("A"))
			ok(t, "link", os.Link(a, b))
			sa, sb := stat(t, a), stat(t, b)
			if sa.Nlink != 2 || sa.Ino != sb.Ino {
				t.Fatalf("nlink %d, ino %d/%d", sa.Nlink, sa.Ino, sb.Ino)
			}
			want(t, "link existing", os.Link(a, b), syscall.EEXIST)
			want(t, "link dir", os.Link(dir, filepath.Join(dir, "d")), syscall.EPERM)
			want(t, "link missing", os.Link(filepath.Join(dir, "nope"), filepath.Join(dir, "c")), syscall.ENOENT)
			ok(t, "unlink one", os.Remove(a))
			if n := stat(t, b).Nlink; n != 1 || string(readFile(t, b)) != "A" {
				t.Fatalf("after unlink: nlink %d", n)
			}
		}},
		{"symlink", func(t *testing.T, dir string) {
			s := filepath.Join(dir, "s")
			ok(t, "symlink", os.Symlink("target/../x", s))
			got, err := os.Readlink(s)
			ok(t, "readlink", err)
			if got != "target/../x" {
				t.Fatalf("readlink %q", got)
			}
			if st := stat(t, s); st.Mode&syscall.S_IFMT != syscall.S_IFLNK || st.Size != int64(len(got)) {
				t.Fatalf("mode %o size %d", st.Mode, st.Size)
			}
			want(t, "symlink existing", os.Symlink("y", s), syscall.EEXIST)
			writeFile(t, filepath.Join(dir, "x"), nil)
			_, err = os.Readlink(filepath.Join(dir, "x"))
			want(t, "readlink file", err, syscall.EINVAL)
			_, err = os.Stat(s)
			want(t, "dangling", err, syscall.ENOENT)
			ok(t, "symlink to file", os.Symlink("x", filepath.Join(dir, "s2")))
			if _, err := os.Stat(filepath.Join(dir, "s2")); err != nil {
				t.Fatal(err)
			}
		}},
		{"mknod_fifo", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "fifo")
			ok(t, "mkfifo", syscall.Mkfifo(p, 0o620))
			if m := stat(t, p).Mode; m != syscall.S_IFIFO|0o620 {
				t.Fatalf("mode %o", m)
			}
			want(t, "mkfifo existing", syscall.Mkfifo(p, 0o600), syscall.EEXIST)
			// A fifo on the file system is a pipe in the kernel.
			done := make(chan []byte)
			go func() {
				b, _ := os.ReadFile(p)
				done <- b
			}()
			w, err := os.OpenFile(p, os.O_WRONLY, 0)
			ok(t, "open fifo", err)
			w.Write([]byte("through the pipe"))
			w.Close()
			if b := <-done; string(b) != "through the pipe" {
				t.Fatalf("fifo read %q", b)
			}
		}},
	}
}

// BigDirEntry is entry i of the large directory: its name and whether it
// is a directory (every 100th) or a regular file.
func BigDirEntry(i int) (string, bool) { return name(i), i%100 == 0 }

// bigDirCheck lists a directory of n entries and checks names and types.
func bigDirCheck(n int, populate func(dir string, n int) error) check {
	return check{"readdir_big", func(t *testing.T, dir string) {
		if populate != nil {
			ok(t, "populate", populate(dir, n))
		} else {
			createBig(t, dir, n)
		}
		listBig(t, dir, n)
	}}
}

// createBig creates the entries of the large directory.
func createBig(t *testing.T, dir string, n int) {
	// Create in parallel: a metadata service commits concurrent
	// creates in groups.
	const workers = 32
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		go func(w int) {
			for i := w; i < n; i += workers {
				p := filepath.Join(dir, name(i))
				var err error
				if i%100 == 0 {
					err = syscall.Mkdir(p, 0o755)
				} else {
					err = syscall.Mknod(p, syscall.S_IFREG|0o644, 0)
				}
				if err != nil {
					errs <- fmt.Errorf("entry %d: %w", i, err)
					return
				}
			}
			errs <- nil
		}(w)
	}
	for w := 0; w < workers; w++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// listBig lists the large directory and checks names and types.
func listBig(t *testing.T, dir string, n int) {
	f, err := os.Open(dir)
	ok(t, "opendir", err)
	defer f.Close()
	var got []os.DirEntry
	for {
		ents, err := f.ReadDir(1000)
		got = append(got, ents...)
		if err != nil || len(ents) == 0 {
			break
		}
	}
	if len(got) != n {
		t.Fatalf("listed %d entries, want %d", len(got), n)
	}
	sort.Slice(got, func(i, j int) bool { return got[i].Name() < got[j].Name() })
	for i, e := range got {
		if e.Name() != name(i) || e.IsDir() != (i%100 == 0) {
			t.Fatalf("entry %d: %s dir=%v", i, e.Name(), e.IsDir())
		}
	}
}

func name(i int) string { return fmt.Sprintf("entry-%07d", i) }
