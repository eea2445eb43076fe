package cluster

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"poolfs/internal/testlog"
	"strings"
	"syscall"
	"testing"
	"time"

	"poolfs/internal/chunkstore"
)

// TestOlderClusterDirTightened: a cluster directory an older poolfs left
// open to everyone (0755 directories, 0644 files, all the way down) is
// made its owner's only when the cluster starts, the change is logged,
// and every byte still reads back.
func TestOlderClusterDirTightened(t *testing.T) {
	for _, format := range []chunkstore.Format{chunkstore.FormatSegments, chunkstore.FormatFiles} {
		t.Run(string(format), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "c")
			c, conn := startTest(t, Config{Dir: dir, Drives: 8, Scheme: "4+2", Unit: 64 << 10, DriveFormat: format})
			data := randBytes(t, 3<<20+11)
			put(t, conn, "/f", data)
			conn.Close()
			c.Close()
			err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				mode := fs.FileMode(0o644)
				if d.IsDir() {
					mode = 0o755
				}
				return os.Chmod(p, mode)
			})
			if err != nil {
				t.Fatal(err)
			}

			var logs testlog.Buffer
			log := slog.New(slog.NewTextHandler(&logs, nil))
			_, conn = startTest(t, Config{Dir: dir, Logger: log})
			if got := get(t, conn, "/f"); !bytes.Equal(got, data) {
				t.Fatal("data differs after the restart that tightened the directory")
			}
			want := map[string]fs.FileMode{
				".": 0o700, "drives": 0o700, "drives/d00": 0o700, "drives/d07": 0o700,
				"meta.db": 0o600, "secret": 0o600, "cluster.json": 0o600, "lock": 0o600,
				"drives/d00/LOCK": 0o600, "drives/d00/FORMAT": 0o600,
			}
			if format == chunkstore.FormatSegments {
				want["drives/d00/segs"] = 0o700
			} else {
				want["drives/d00/frags"] = 0o700
			}
			for p, mode := range want {
				st, err := os.Stat(filepath.Join(dir, p))
				if err != nil {
					t.Fatal(err)
				}
				if st.Mode().Perm() != mode {
					t.Errorf("%s: mode %04o after start, want %04o", p, st.Mode().Perm(), mode)
				}
			}
			if out := logs.String(); !strings.Contains(out, "removed group and other permissions") || !strings.Contains(out, dir+" (was 0755)") {
				t.Errorf("the tightening was not logged:\n%s", out)
			}
		})
	}
}

// TestLockHeldByOtherUser: another user who opened the lock file of a
// directory an older poolfs left open, and holds a flock on it, keeps the
// cluster from starting (the open descriptor outlives the tightening);
// the error names that process and says it is another user's. A new
// directory's lock file that user cannot open at all.
func TestLockHeldByOtherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to act as another user")
	}
	base := t.TempDir()
	for _, p := range []string{filepath.Dir(base), base} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(base, "c")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	lock := filepath.Join(dir, "lock")
	if err := os.WriteFile(lock, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	nobody := &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
	hold := exec.Command("flock", "--shared", "--nonblock", "--close", lock, "sleep", "60")
	hold.SysProcAttr = nobody
	if err := hold.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hold.Process.Kill(); hold.Wait() })
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile("/proc/locks")
		if bytes.Contains(b, []byte(fmt.Sprintf(" %d ", hold.Process.Pid))) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("flock as nobody took no lock")
		}
		time.Sleep(10 * time.Millisecond)
	}
	_, err := Start(context.Background(), Config{Dir: dir, Listen: "127.0.0.1:0", Drives: 8, Scheme: "4+2", DriveSize: 1 << 30})
	want := fmt.Sprintf("locked by process %d of uid 65534, another user", hold.Process.Pid)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("start with the lock held by nobody: %v, want %q", err, want)
	}
	hold.Process.Kill()
	hold.Wait()
	// flock(1)'s child (sleep) shares the locked descriptor until it has
	// closed it (--close): on a loaded machine that can be after the
	// parent's death, so wait until the lock is free.
	for deadline := time.Now().Add(10 * time.Second); exec.Command("flock", "--nonblock", lock, "true").Run() != nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the lock stayed held after its holder was killed")
		}
	}

	_, conn := startTest(t, Config{Dir: dir, Drives: 8, Scheme: "4+2"})
	conn.Close()
	again := exec.Command("flock", "--shared", "--nonblock", lock, "true")
	again.SysProcAttr = nobody
	if out, err := again.CombinedOutput(); err == nil || !strings.Contains(string(out), "Permission denied") {
		t.Fatalf("nobody opened the lock file after the start: %v %s", err, out)
	}
}
