package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"poolfs/internal/client"
	"poolfs/internal/cluster"
)

// nobody is the unprivileged user the tests act as.
const nobody = 65534

// asNobody runs argv as uid/gid 65534 with no supplementary groups and
// returns its exit error and combined output.
func asNobody(argv ...string) (string, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// openToOthers returns the paths under dir whose mode has any group or
// other permission bit.
func openToOthers(t *testing.T, dir string) []string {
	t.Helper()
	var bad []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil // removed meanwhile (temp files)
			}
			return err
		}
		info, err := d.Info()
		if os.IsNotExist(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if info.Mode()&fs.ModeSymlink == 0 && info.Mode().Perm()&0o077 != 0 {
			bad = append(bad, p+" "+info.Mode().String())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return bad
}

// TestClusterDirPrivate runs a busy cluster (started with umask 0: the
// modes must not come from it) with a mount, writes through the mount and
// the client, fails a drive and waits for its rebuild, adds a drive, runs
// the collector; then checks that nothing under the cluster directory has
// a group or other permission bit, and that another local user can
// neither read a segment file, meta.db or the secret, nor list the drives,
// nor flock the lock files, nor find the file's bytes with grep.
func TestClusterDirPrivate(t *testing.T) {
	requireFUSE(t)
	for _, format := range []string{"segments", "files"} {
		t.Run(format, func(t *testing.T) { testClusterDirPrivate(t, format) })
	}
}

func testClusterDirPrivate(t *testing.T, format string) {
	base := t.TempDir()
	// t.TempDir is 0700: open the way to the cluster directory, so that
	// only the cluster directory's own modes stand between it and others.
	for _, p := range []string{filepath.Dir(base), base} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dir, mnt := filepath.Join(base, "cluster"), filepath.Join(base, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	old := syscall.Umask(0)
	up := startUp(t, dir, "--drives", "8", "--scheme", "4+2", "--unit", "64K", "--drive-size", "1G",
		"--drive-format", format, "--mount", mnt)
	syscall.Umask(old)
	waitMounted(t, mnt, up.out.String)

	tag := make([]byte, 16)
	rand.Read(tag)
	unique := "private-" + hex.EncodeToString(tag)
	data := bytes.Repeat([]byte(unique+"\n"), 300000/(len(unique)+1))
	if err := os.WriteFile(filepath.Join(mnt, "mine"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(t.TempDir(), "src")
	writeRandom(t, src, 5<<20+7)
	run(t, "put", "-c", dir, src, "/put.bin")
	run(t, "drive", "fail", "-c", dir, "d03")
	waitRebuilt(t, dir, up)
	run(t, "drive", "add", "-c", dir)
	waitRebuilt(t, dir, up)
	if err := os.Remove(filepath.Join(mnt, "mine")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mnt, "mine"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	run(t, "gc", "-c", dir)
	if got, err := os.ReadFile(filepath.Join(mnt, "mine")); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("file read back through the mount differs (%v)", err)
	}

	if bad := openToOthers(t, dir); len(bad) > 0 {
		t.Errorf("open to group or others while running:\n%s", strings.Join(bad, "\n"))
	}
	// The file's bytes are on the drives, where the owner's grep finds them.
	// (-s, and the output rather than the exit status: the cluster is
	// running, and a temporary file may vanish while grep walks the tree.)
	if out, _ := exec.Command("grep", "-rls", unique, dir).Output(); len(bytes.TrimSpace(out)) == 0 {
		t.Fatalf("grep as owner found no fragment holding the file")
	}
	frags, _ := filepath.Glob(filepath.Join(dir, "drives", "d00", "segs", "*.seg"))
	if format == "files" {
		frags, _ = filepath.Glob(filepath.Join(dir, "drives", "d00", "frags", "*", "*"))
	}
	if len(frags) == 0 {
		t.Fatal("no segment or fragment file on d00")
	}
	if out, err := asNobody("ls", base); err != nil || !strings.Contains(out, "cluster") {
		t.Fatalf("as nobody, ls of the cluster directory's parent: %v %s (the test's own setup)", err, out)
	}
	for _, argv := range [][]string{
		{"cat", frags[0]},
		{"cat", filepath.Join(dir, "meta.db")},
		{"cat", filepath.Join(dir, "secret")},
		{"cat", filepath.Join(dir, "cluster.json")},
		{"ls", filepath.Join(dir, "drives")},
		{"ls", dir},
		{"flock", "-n", filepath.Join(dir, "lock"), "true"},
		{"flock", "-n", filepath.Join(dir, "drives", "d00", "LOCK"), "true"},
		{"grep", "-rl", unique, dir},
	} {
		out, err := asNobody(argv...)
		if err == nil || !strings.Contains(out, "Permission denied") {
			t.Errorf("as nobody, %s: %v, output %q; want permission denied", strings.Join(argv, " "), err, out)
		}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			if strings.Contains(line, unique) || !strings.Contains(line, "Permission denied") {
				t.Errorf("as nobody, %s read something: %q", strings.Join(argv, " "), line)
			}
		}
	}

	up.stop(t)
	detach(mnt)
	if bad := openToOthers(t, dir); len(bad) > 0 {
		t.Errorf("open to group or others after stop:\n%s", strings.Join(bad, "\n"))
	}
}

// waitRebuilt waits until the cluster of dir has no degraded, critical
// or misplaced stripe and no rebuild running.
func waitRebuilt(t *testing.T, dir string, up *upProc) {
	t.Helper()
	ctx := context.Background()
	conn, err := cluster.Connect(ctx, dir, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	deadline := time.Now().Add(120 * time.Second)
	for {
		st, err := conn.Mgmt.Rebuild(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !st.Active && st.Stripes > 0 && st.Degraded+st.Critical+st.Misplaced == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("rebuild did not finish: %+v\n%s", st, up.out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
