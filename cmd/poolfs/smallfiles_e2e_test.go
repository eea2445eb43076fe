package main

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestSmallFilesCloseVisibleFsyncDurable writes small files through
// `poolfs up --mount` (12 drives, 8+2: mirrored small files): each is read
// by a second client, a separate `poolfs mount`, right after its close;
// some are fsynced (fsync, fdatasync, O_DSYNC writes), the rest only
// closed; more are written and fsynced through the second mount (drives
// and metadata over RPC). Then every poolfs process is killed with SIGKILL and the cluster
// restarted: the fsynced files are there byte for byte, each closed one is
// its data, absent or empty (its create or commit lost with the metadata
// engine's last uncommitted changes), never other bytes, and fsck passes.
func TestSmallFilesCloseVisibleFsyncDurable(t *testing.T) {
	requireFUSE(t)
	dir := t.TempDir()
	mnt, mnt2 := filepath.Join(t.TempDir(), "mnt"), filepath.Join(t.TempDir(), "mnt2")
	os.Mkdir(mnt, 0o755)
	os.Mkdir(mnt2, 0o755)
	args := []string{"--drives", "12", "--drive-size", "1G", "--mount", mnt}
	up := startUp(t, dir, args...)
	waitMounted(t, mnt, up.out.String)
	second := exec.Command(binary, "mount", "-c", dir, mnt2)
	var sout bytes.Buffer
	second.Stdout, second.Stderr = &sout, &sout
	if err := second.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { second.Process.Kill(); second.Wait() })
	waitMounted(t, mnt2, sout.String)
	if err := os.Mkdir(filepath.Join(mnt, "d"), 0o755); err != nil {
		t.Fatal(err)
	}

	synced := map[string][]byte{}
	closed := map[string][]byte{}
	for i := range 60 {
		name := fmt.Sprintf("d/f%03d", i)
		data := make([]byte, []int{4096, 65536, 1000, 20000}[i%4])
		rand.Read(data)
		p := filepath.Join(mnt, name)
		how := []string{"close", "fsync", "close", "fdatasync", "close", "dsync"}[i%6]
		flags := os.O_CREATE | os.O_WRONLY | os.O_TRUNC
		if how == "dsync" {
			flags |= os.O_SYNC
		}
		f, err := os.OpenFile(p, flags, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(data); err != nil {
			t.Fatal(err)
		}
		switch how {
		case "fsync":
			err = f.Sync()
		case "fdatasync":
			err = unix.Fdatasync(int(f.Fd()))
		}
		if err != nil {
			t.Fatalf("%s %s: %v", how, name, err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if how == "close" {
			closed[name] = data
		} else {
			synced[name] = data
		}
		// Visible to the other client as soon as close returned.
		got, err := os.ReadFile(filepath.Join(mnt2, name))
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s read by a second mount right after close: %d bytes, %v (want %d)", name, len(got), err, len(data))
		}
	}

	// The second mount reaches the drives and the metadata service over
	// RPC: its fsync syncs them there (storage.Sync, meta Sync).
	for i := range 10 {
		name := fmt.Sprintf("d/r%02d", i)
		data := make([]byte, 4096*(1+i%3))
		rand.Read(data)
		f, err := os.Create(filepath.Join(mnt2, name))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatalf("fsync %s through the second mount: %v", name, err)
		}
		f.Close()
		synced[name] = data
	}

	second.Process.Signal(syscall.SIGKILL)
	up.cmd.Process.Signal(syscall.SIGKILL)
	second.Wait()
	up.cmd.Wait()
	detach(mnt)
	detach(mnt2)

	up = startUp(t, dir, args...)
	waitMounted(t, mnt, up.out.String)
	for name, data := range synced {
		got, err := os.ReadFile(filepath.Join(mnt, name))
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("fsynced %s after SIGKILL and restart: %d bytes (want %d), %v", name, len(got), len(data), err)
		}
	}
	kept := 0
	for name, data := range closed {
		got, err := os.ReadFile(filepath.Join(mnt, name))
		switch {
		case err == nil && bytes.Equal(got, data):
			kept++
		case errors.Is(err, fs.ErrNotExist), err == nil && len(got) == 0:
		default:
			t.Errorf("closed %s after SIGKILL and restart: %d bytes (want %d or none), %v", name, len(got), len(data), err)
		}
	}
	t.Logf("%d of %d closed files kept their data", kept, len(closed))
	if out, ok := fsckRun(t, dir); !ok {
		t.Fatalf("fsck after SIGKILL:\n%s", out)
	}
	up.stop(t)
}
