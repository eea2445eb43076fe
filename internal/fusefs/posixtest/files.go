package posixtest

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// fileChecks cover opening, reading and writing regular files.
func fileChecks() []check {
	return []check{
		{"create_excl", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "f")
			fd, err := syscall.Open(p, syscall.O_CREAT|syscall.O_EXCL|syscall.O_RDWR, 0o640)
			ok(t, "create", err)
			syscall.Close(fd)
			_, err = syscall.Open(p, syscall.O_CREAT|syscall.O_EXCL|syscall.O_RDWR, 0o640)
			want(t, "create again", err, syscall.EEXIST)
			if m := stat(t, p).Mode; m != syscall.S_IFREG|0o640 {
				t.Fatalf("mode %o", m)
			}
			_, err = syscall.Open(filepath.Join(dir, "missing"), syscall.O_RDONLY, 0)
			want(t, "open missing", err, syscall.ENOENT)
			_, err = syscall.Open(dir, syscall.O_WRONLY, 0)
			want(t, "open dir for writing", err, syscall.EISDIR)
			_, err = syscall.Open(filepath.Join(p, "x"), syscall.O_CREAT|syscall.O_RDWR, 0o644)
			want(t, "create below a file", err, syscall.ENOTDIR)
		}},
		{"trunc_append", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "f")
			writeFile(t, p, []byte("0123456789"))
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
			ok(t, "open O_TRUNC", err)
			f.Close()
			if n := stat(t, p).Size; n != 0 {
				t.Fatalf("size after O_TRUNC %d", n)
			}
			writeFile(t, p, []byte("abc"))
			f, err = os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
			ok(t, "open O_APPEND", err)
			_, err = f.Write([]byte("def"))
			ok(t, "append", err)
			_, err = f.Write([]byte("gh"))
			ok(t, "append", err)
			f.Close()
			if b := readFile(t, p); string(b) != "abcdefgh" {
				t.Fatalf("after append: %q", b)
			}
		}},
		{"o_direct", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "f")
			fd, err := syscall.Open(p, syscall.O_CREAT|syscall.O_RDWR|syscall.O_DIRECT, 0o644)
			ok(t, "open O_DIRECT", err)
			defer syscall.Close(fd)
			buf := aligned(1 << 20)
			for i := range buf {
				buf[i] = byte(i * 7)
			}
			_, err = syscall.Pwrite(fd, buf, 1<<20)
			ok(t, "pwrite", err)
			got := aligned(1 << 20)
			n, err := syscall.Pread(fd, got, 1<<20)
			ok(t, "pread", err)
			if n != len(buf) || !bytes.Equal(got, buf) {
				t.Fatalf("O_DIRECT read back %d bytes, differ", n)
			}
			n, err = syscall.Pread(fd, got, 0)
			ok(t, "pread hole", err)
			if n != len(got) || !bytes.Equal(got, make([]byte, n)) {
				t.Fatalf("hole read %d bytes, not zeros", n)
			}
		}},
		{"pread_pwrite_holes", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "f")
			f, err := os.Create(p)
			ok(t, "create", err)
			defer f.Close()
			var model []byte
			put := func(off int, b []byte) {
				if _, err := f.WriteAt(b, int64(off)); err != nil {
					t.Fatal(err)
				}
				if end := off + len(b); end > len(model) {
					model = append(model, make([]byte, end-len(model))...)
				}
				copy(model[off:], b)
			}
			put(3, []byte("abc"))
			put(1<<20+5, bytes.Repeat([]byte{1}, 70000))
			put(10<<20, []byte("end"))
			put(1<<20-2, []byte("straddle"))
			got := make([]byte, len(model)+10)
			n, _ := f.ReadAt(got, 0)
			if n != len(model) || !bytes.Equal(got[:n], model) {
				t.Fatalf("read %d bytes, want %d, equal %v", n, len(model), bytes.Equal(got[:min(n, len(model))], model[:min(n, len(model))]))
			}
			f.Sync()
			if b := readFile(t, p); !bytes.Equal(b, model) {
				t.Fatal("reopen: content differs")
			}
			n, err = f.ReadAt(got[:10], int64(len(model))+100)
			if n != 0 {
				t.Fatalf("read past end: %d, %v", n, err)
			}
		}},
		{"truncate", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "f")
			data := bytes.Repeat([]byte("x"), 3<<20+17)
			writeFile(t, p, data)
			f, err := os.OpenFile(p, os.O_RDWR, 0)
			ok(t, "open", err)
			defer f.Close()
			ok(t, "ftruncate shrink", f.Truncate(100))
			ok(t, "ftruncate grow", f.Truncate(2<<20))
			b := readFile(t, p)
			if len(b) != 2<<20 || !bytes.Equal(b[:100], data[:100]) || !bytes.Equal(b[100:], make([]byte, len(b)-100)) {
				t.Fatalf("after shrink+grow: size %d, old bytes came back or data lost", len(b))
			}
			ok(t, "truncate path", os.Truncate(p, 5<<20))
			if n := stat(t, p).Size; n != 5<<20 {
				t.Fatalf("size %d", n)
			}
			ok(t, "truncate 0", os.Truncate(p, 0))
			if n := stat(t, p).Size; n != 0 {
				t.Fatalf("size %d", n)
			}
			want(t, "truncate dir", os.Truncate(dir, 0), syscall.EISDIR)
			want(t, "ftruncate negative", syscall.Ftruncate(int(f.Fd()), -1), syscall.EINVAL)
		}},
		{"unlink_open", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "f")
			writeFile(t, p, []byte("hello"))
			f, err := os.OpenFile(p, os.O_RDWR, 0)
			ok(t, "open", err)
			defer f.Close()
			ok(t, "unlink", os.Remove(p))
			_, err = os.Stat(p)
			want(t, "stat unlinked", err, syscall.ENOENT)
			_, err = f.WriteAt([]byte(" world"), 5)
			ok(t, "write unlinked", err)
			ok(t, "fsync unlinked", f.Sync())
			b := make([]byte, 20)
			n, _ := f.ReadAt(b, 0)
			if string(b[:n]) != "hello world" {
				t.Fatalf("read unlinked: %q", b[:n])
			}
			var st syscall.Stat_t
			ok(t, "fstat", syscall.Fstat(int(f.Fd()), &st))
			if st.Nlink != 0 {
				t.Fatalf("nlink %d after unlink", st.Nlink)
			}
			want(t, "unlink again", os.Remove(p), syscall.ENOENT)
		}},
		{"fsync", func(t *testing.T, dir string) {
			f, err := os.Create(filepath.Join(dir, "f"))
			ok(t, "create", err)
			defer f.Close()
			f.Write([]byte("data"))
			ok(t, "fsync", f.Sync())
			ok(t, "fdatasync", syscall.Fdatasync(int(f.Fd())))
			d, err := os.Open(dir)
			ok(t, "open dir", err)
			ok(t, "fsync dir", d.Sync())
			d.Close()
		}},
		{"locks", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "f")
			writeFile(t, p, []byte("x"))
			a, _ := os.OpenFile(p, os.O_RDWR, 0)
			b, _ := os.OpenFile(p, os.O_RDWR, 0)
			defer a.Close()
			defer b.Close()
			ok(t, "flock a", syscall.Flock(int(a.Fd()), syscall.LOCK_EX|syscall.LOCK_NB))
			want(t, "flock b", syscall.Flock(int(b.Fd()), syscall.LOCK_EX|syscall.LOCK_NB), syscall.EWOULDBLOCK)
			ok(t, "unlock a", syscall.Flock(int(a.Fd()), syscall.LOCK_UN))
			ok(t, "flock b after unlock", syscall.Flock(int(b.Fd()), syscall.LOCK_SH|syscall.LOCK_NB))
			lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: 0, Len: 10}
			ok(t, "ofd lock a", unix.FcntlFlock(a.Fd(), unix.F_OFD_SETLK, &lk))
			want(t, "ofd lock b", unix.FcntlFlock(b.Fd(), unix.F_OFD_SETLK, &lk), syscall.EAGAIN)
			q := unix.Flock_t{Type: unix.F_WRLCK, Start: 5, Len: 1}
			ok(t, "ofd getlk", unix.FcntlFlock(b.Fd(), unix.F_OFD_GETLK, &q))
			if q.Type != unix.F_WRLCK {
				t.Fatalf("F_OFD_GETLK type %d, want the conflicting write lock", q.Type)
			}
			lk.Start = 20
			ok(t, "ofd lock b elsewhere", unix.FcntlFlock(b.Fd(), unix.F_OFD_SETLK, &lk))
			pl := syscall.Flock_t{Type: syscall.F_RDLCK, Start: 100, Len: 10}
			ok(t, "posix lock", syscall.FcntlFlock(a.Fd(), syscall.F_SETLK, &pl))
		}},
	}
}

// aligned returns a zeroed buffer aligned for O_DIRECT.
func aligned(n int) []byte {
	b := make([]byte, n+4096)
	off := int(4096 - uintptr(unsafe.Pointer(&b[0]))%4096)
	return b[off%4096 : off%4096+n]
}
