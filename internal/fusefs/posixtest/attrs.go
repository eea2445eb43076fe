package posixtest

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// attrChecks cover attributes, extended attributes, statfs and permissions.
func attrChecks() []check {
	return []check{
		{"chmod_chown_utimens", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "f")
			writeFile(t, p, []byte("x"))
			ok(t, "chmod", syscall.Chmod(p, 0o4751))
			if m := stat(t, p).Mode; m != syscall.S_IFREG|0o4751 {
				t.Fatalf("mode %o", m)
			}
			ok(t, "chown", os.Lchown(p, Nobody, Nobody))
			if st := stat(t, p); st.Uid != Nobody || st.Gid != Nobody {
				t.Fatalf("owner %d:%d", st.Uid, st.Gid)
			}
			at := time.Date(2001, 2, 3, 4, 5, 6, 7000, time.UTC)
			mt := time.Date(2002, 3, 4, 5, 6, 7, 8000, time.UTC)
			ok(t, "utimens", os.Chtimes(p, at, mt))
			st := stat(t, p)
			if st.Atim.Nano() != at.UnixNano() || st.Mtim.Nano() != mt.UnixNano() {
				t.Fatalf("times %v %v", time.Unix(0, st.Atim.Nano()), time.Unix(0, st.Mtim.Nano()))
			}
			before := time.Now().Add(-2 * time.Second)
			ok(t, "utimens now", syscall.UtimesNano(p, []syscall.Timespec{{Nsec: (1 << 30) - 1}, {Nsec: (1 << 30) - 1}}))
			if st := stat(t, p); time.Unix(0, st.Mtim.Nano()).Before(before) {
				t.Fatalf("UTIME_NOW: mtime %v", time.Unix(0, st.Mtim.Nano()))
			}
			m0 := stat(t, p).Mtim.Nano()
			time.Sleep(20 * time.Millisecond)
			f, _ := os.OpenFile(p, os.O_WRONLY, 0)
			f.Write([]byte("y"))
			f.Close()
			if stat(t, p).Mtim.Nano() == m0 {
				t.Fatal("write did not change mtime")
			}
			_, err := os.Stat(filepath.Join(dir, "nope"))
			want(t, "stat missing", err, syscall.ENOENT)
			want(t, "chmod missing", os.Chmod(filepath.Join(dir, "nope"), 0o644), syscall.ENOENT)
		}},
		{"xattr", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "f")
			writeFile(t, p, nil)
			buf := make([]byte, 100)
			_, err := syscall.Getxattr(p, "user.a", buf)
			want(t, "get missing", err, syscall.ENODATA)
			want(t, "remove missing", syscall.Removexattr(p, "user.a"), syscall.ENODATA)
			want(t, "replace missing", syscall.Setxattr(p, "user.a", []byte("v"), 2), syscall.ENODATA)
			ok(t, "create", syscall.Setxattr(p, "user.a", []byte("value-a"), 1))
			want(t, "create existing", syscall.Setxattr(p, "user.a", []byte("v"), 1), syscall.EEXIST)
			ok(t, "replace", syscall.Setxattr(p, "user.a", []byte("value-A"), 2))
			ok(t, "set", syscall.Setxattr(p, "user.b", nil, 0))
			ok(t, "set trusted", syscall.Setxattr(p, "trusted.t", []byte("1"), 0))
			n, err := syscall.Getxattr(p, "user.a", buf)
			ok(t, "get", err)
			if string(buf[:n]) != "value-A" {
				t.Fatalf("get %q", buf[:n])
			}
			n, err = syscall.Getxattr(p, "user.a", nil)
			ok(t, "get size", err)
			if n != 7 {
				t.Fatalf("size %d", n)
			}
			_, err = syscall.Getxattr(p, "user.a", buf[:3])
			want(t, "get small buffer", err, syscall.ERANGE)
			n, err = syscall.Getxattr(p, "user.b", buf)
			if err != nil || n != 0 {
				t.Fatalf("empty value: %d %v", n, err)
			}
			n, err = syscall.Listxattr(p, buf)
			ok(t, "list", err)
			names := strings.Split(strings.TrimSuffix(string(buf[:n]), "\x00"), "\x00")
			if !hasAll(names, "user.a", "user.b", "trusted.t") {
				t.Fatalf("list %q", names)
			}
			_, err = syscall.Listxattr(p, buf[:5])
			want(t, "list small buffer", err, syscall.ERANGE)
			want(t, "value too big", syscall.Setxattr(p, "user.big", make([]byte, 65537), 0), syscall.E2BIG)
			// 3000 bytes: ext4 keeps values within one block.
			ok(t, "value 3000 bytes", syscall.Setxattr(p, "user.big", bytes.Repeat([]byte{7}, 3000), 0))
			big := make([]byte, 65536)
			n, err = syscall.Getxattr(p, "user.big", big)
			if err != nil || n != 3000 || big[2999] != 7 {
				t.Fatalf("get 3000 bytes: %d %v", n, err)
			}
			want(t, "name too long", syscall.Setxattr(p, "user."+strings.Repeat("x", 251), nil, 0), syscall.ERANGE)
			ok(t, "remove", syscall.Removexattr(p, "user.a"))
			_, err = syscall.Getxattr(p, "user.a", buf)
			want(t, "get removed", err, syscall.ENODATA)
			ok(t, "dir xattr", syscall.Setxattr(dir, "user.d", []byte("1"), 0))
			s := filepath.Join(dir, "s")
			os.Symlink("f", s)
			if err := syscall.Setxattr(s, "user.x", nil, 0); err != nil {
				t.Fatalf("set through symlink: %v", err)
			}
		}},
		{"statfs", func(t *testing.T, dir string) {
			var st syscall.Statfs_t
			ok(t, "statfs", syscall.Statfs(dir, &st))
			if st.Blocks == 0 || st.Bfree > st.Blocks || st.Bavail > st.Bfree || st.Bsize == 0 || st.Namelen != 255 || st.Files == 0 {
				t.Fatalf("statfs %+v", st)
			}
		}},
		{"permissions", permissions},
	}
}

func hasAll(list []string, names ...string) bool {
	for _, n := range names {
		found := false
		for _, l := range list {
			found = found || l == n
		}
		if !found {
			return false
		}
	}
	return true
}

// permissions runs as uid/gid Nobody: mode bits, ownership of new files,
// chmod/chown rules, the sticky bit.
func permissions(t *testing.T, dir string) {
	priv := filepath.Join(dir, "private")
	writeFile(t, priv, []byte("secret"))
	ok(t, "chmod", os.Chmod(priv, 0o600))
	ro := filepath.Join(dir, "ro")
	os.Mkdir(ro, 0o755)
	open := filepath.Join(dir, "open")
	os.Mkdir(open, 0o777)
	ok(t, "chmod", syscall.Chmod(open, 0o1777)) // sticky, like /tmp
	rootFile := filepath.Join(open, "rootfile")
	writeFile(t, rootFile, nil)
	ok(t, "chmod", os.Chmod(rootFile, 0o666))
	readable := filepath.Join(dir, "readable")
	writeFile(t, readable, []byte("public"))
	os.Chmod(readable, 0o644)

	type step struct {
		name  string
		do    func() error
		errno syscall.Errno
	}
	mine := filepath.Join(open, "mine")
	steps := []step{
		{"read 0600 of root", func() error { _, err := syscall.Open(priv, syscall.O_RDONLY, 0); return err }, syscall.EACCES},
		{"read 0644", func() error {
			fd, err := syscall.Open(readable, syscall.O_RDONLY, 0)
			if err == nil {
				syscall.Close(fd)
			}
			return err
		}, 0},
		{"write 0644 of root", func() error { _, err := syscall.Open(readable, syscall.O_WRONLY, 0); return err }, syscall.EACCES},
		{"create in 0755 of root", func() error {
			_, err := syscall.Open(filepath.Join(ro, "x"), syscall.O_CREAT|syscall.O_WRONLY, 0o644)
			return err
		}, syscall.EACCES},
		{"mkdir in 0755 of root", func() error { return syscall.Mkdir(filepath.Join(ro, "x"), 0o755) }, syscall.EACCES},
		{"create in 1777", func() error {
			fd, err := syscall.Open(mine, syscall.O_CREAT|syscall.O_WRONLY, 0o644)
			if err == nil {
				syscall.Close(fd)
			}
			return err
		}, 0},
		{"chmod own file", func() error { return syscall.Chmod(mine, 0o600) }, 0},
		{"chmod root's file", func() error { return syscall.Chmod(readable, 0o666) }, syscall.EPERM},
		{"chown own file to root", func() error { return syscall.Chown(mine, 0, 0) }, syscall.EPERM},
		{"unlink root's file in sticky dir", func() error { return syscall.Unlink(rootFile) }, syscall.EPERM},
		{"utimes root's file", func() error { return syscall.UtimesNano(readable, []syscall.Timespec{{Sec: 1}, {Sec: 1}}) }, syscall.EPERM},
		{"truncate root's file", func() error { return syscall.Truncate(readable, 0) }, syscall.EACCES},
		{"rename own file", func() error { return syscall.Rename(mine, mine+"2") }, 0},
		{"unlink own file", func() error { return syscall.Unlink(mine + "2") }, 0},
		{"set user xattr on root's file", func() error { return syscall.Setxattr(readable, "user.x", nil, 0) }, syscall.EACCES},
		{"trusted xattr", func() error { return syscall.Setxattr(readable, "trusted.x", nil, 0) }, syscall.EPERM},
	}
	var mineSt *syscall.Stat_t
	err := asUser(Nobody, Nobody, func() error {
		for _, s := range steps {
			if got := errnoOf(s.do()); got != s.errno {
				t.Errorf("as uid %d: %s: got %v, want %v", Nobody, s.name, got, s.errno)
			}
			if s.name == "create in 1777" {
				var st syscall.Stat_t
				if err := syscall.Stat(mine, &st); err == nil {
					mineSt = &st
				}
			}
		}
		return nil
	})
	ok(t, "as user", err)
	if mineSt == nil || mineSt.Uid != Nobody || mineSt.Gid != Nobody {
		t.Fatalf("file created by uid %d: %+v", Nobody, mineSt)
	}
	// setgid directories hand their group down.
	sg := filepath.Join(dir, "sgid")
	os.Mkdir(sg, 0o777)
	os.Chown(sg, 0, 4242)
	ok(t, "chmod g+s", syscall.Chmod(sg, 0o2777))
	writeFile(t, filepath.Join(sg, "f"), nil)
	ok(t, "mkdir in setgid", os.Mkdir(filepath.Join(sg, "d"), 0o755))
	if st := stat(t, filepath.Join(sg, "f")); st.Gid != 4242 {
		t.Fatalf("file in setgid dir: gid %d", st.Gid)
	}
	if st := stat(t, filepath.Join(sg, "d")); st.Gid != 4242 || st.Mode&syscall.S_ISGID == 0 {
		t.Fatalf("dir in setgid dir: gid %d mode %o", st.Gid, st.Mode)
	}
}
