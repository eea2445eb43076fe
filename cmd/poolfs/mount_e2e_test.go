package main

import (
	"bytes"
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// requireFUSE skips (fails under CI) when this machine cannot mount.
func requireFUSE(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err == nil && os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatal("cannot run FUSE tests: need /dev/fuse and root")
	}
	t.Skip("cannot run FUSE tests: need /dev/fuse and root")
}

// isMounted reports whether dir is a mount point of poolfs.
func isMounted(dir string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	return err == nil && bytes.Contains(b, []byte(" "+dir+" ")) && bytes.Contains(b, []byte("fuse.poolfs"))
}

// waitMounted waits for dir to become a poolfs mount and arranges a lazy
// unmount at cleanup, whatever happens to the process serving it.
func waitMounted(t *testing.T, dir string, out func() string) {
	t.Helper()
	t.Cleanup(func() { detach(dir) })
	deadline := time.Now().Add(30 * time.Second)
	for !isMounted(dir) {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not get mounted: %s", dir, out())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// detach lazily unmounts dir (a dead server leaves "transport endpoint is
// not connected" behind).
func detach(dir string) {
	for isMounted(dir) {
		if exec.Command("fusermount3", "-u", "-z", dir).Run() != nil {
			if syscall.Unmount(dir, syscall.MNT_DETACH) != nil {
				return
			}
		}
	}
}

// TestMountFsyncDurable writes through `poolfs up --mount`, fsyncs, kills
// every poolfs process with SIGKILL (one of them a separate `poolfs mount`
// in the middle of writing a big file), restarts and remounts: fsynced
// data is there byte for byte, and the killed writer damaged neither other
// files nor the namespace.
func TestMountFsyncDurable(t *testing.T) {
	requireFUSE(t)
	dir := t.TempDir()
	mnt, mnt2 := filepath.Join(t.TempDir(), "mnt"), filepath.Join(t.TempDir(), "mnt2")
	os.Mkdir(mnt, 0o755)
	os.Mkdir(mnt2, 0o755)
	args := []string{"--drives", "8", "--scheme", "4+2", "--unit", "64K", "--drive-size", "1G", "--mount", mnt}
	up := startUp(t, dir, args...)
	waitMounted(t, mnt, up.out.String)

	files := map[string][]byte{}
	for name, size := range map[string]int{"a": 10, "d/b": 3<<20 + 5, "d/e/c": 700001} {
		p := filepath.Join(mnt, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		data := make([]byte, size)
		rand.Read(data)
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		f.Write(data)
		if err := f.Sync(); err != nil {
			t.Fatalf("fsync %s: %v", name, err)
		}
		files[name] = data // left open: fsync alone must make it durable
		defer f.Close()
	}
	if err := os.Rename(filepath.Join(mnt, "a"), filepath.Join(mnt, "d", "a2")); err != nil {
		t.Fatal(err)
	}
	files["d/a2"] = files["a"]
	delete(files, "a")

	// A second client mount, killed while it writes a big file.
	mcmd := exec.Command(binary, "mount", "-c", dir, mnt2)
	var mout bytes.Buffer
	mcmd.Stdout, mcmd.Stderr = &mout, &mout
	if err := mcmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mcmd.Process.Kill(); mcmd.Wait() })
	waitMounted(t, mnt2, mout.String)
	dd := exec.Command("dd", "if=/dev/urandom", "of="+filepath.Join(mnt2, "d", "partial"), "bs=1M", "count=64")
	if err := dd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(700 * time.Millisecond)
	mcmd.Process.Signal(syscall.SIGKILL)
	up.cmd.Process.Signal(syscall.SIGKILL)
	dd.Wait()
	mcmd.Wait()
	up.cmd.Wait()
	detach(mnt)
	detach(mnt2)

	up = startUp(t, dir, args...)
	waitMounted(t, mnt, up.out.String)
	for name, data := range files {
		got, err := os.ReadFile(filepath.Join(mnt, name))
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("%s after SIGKILL and restart: %d bytes (want %d), err %v", name, len(got), len(data), err)
		}
	}
	ents, err := os.ReadDir(filepath.Join(mnt, "d"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if got := strings.Join(names, ","); got != "a2,b,e" && got != "a2,b,e,partial" {
		t.Fatalf("namespace after crash: %s", got)
	}
	// Whatever of the killed write was committed reads without error.
	if _, err := os.ReadFile(filepath.Join(mnt, "d", "partial")); err != nil && !os.IsNotExist(err) {
		t.Fatalf("partial file: %v", err)
	}
	out := run(t, "getstripe", "-c", dir, "/d/b")
	if !strings.Contains(out, "ec 4+2") || !strings.Contains(out, "stripes 13 of 13") {
		t.Fatalf("getstripe: %s", out)
	}
	up.stop(t)
	if isMounted(mnt) {
		t.Fatal("poolfs up did not unmount at SIGTERM")
	}
}

// TestSetstripe sets a directory layout and checks that new files get it.
func TestSetstripe(t *testing.T) {
	dir := t.TempDir()
	startUp(t, dir, "--drives", "12", "--scheme", "8+2", "--unit", "64K", "--drive-size", "1G")
	run(t, "mkdir", "-c", dir, "/s")
	if out, err := exec.Command(binary, "setstripe", "-c", dir, "/s", "--scheme", "9+2").CombinedOutput(); err == nil {
		t.Fatalf("setstripe 9+2 on an 8+2 pool succeeded: %s", out)
	}
	out := run(t, "setstripe", "-c", dir, "/s", "--unit", "256K", "--scheme", "7+3")
	if !strings.Contains(out, "ec 7+3, unit 256.0 KiB") {
		t.Fatalf("setstripe: %s", out)
	}
	src := filepath.Join(t.TempDir(), "src")
	writeRandom(t, src, 5<<20)
	run(t, "put", "-c", dir, src, "/s/f")
	out = run(t, "getstripe", "-c", dir, "/s/f")
	if !strings.Contains(out, "ec 7+3, unit 256.0 KiB") || !strings.Contains(out, "stripes 3 of 3") {
		t.Fatalf("getstripe: %s", out)
	}
}
