package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// fails runs poolfs with args, expects it to fail, and returns its output.
func fails(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(binary, args...).CombinedOutput()
	if err == nil {
		t.Fatalf("poolfs %s succeeded:\n%s", strings.Join(args, " "), out)
	}
	return string(out)
}

// TestPutIntoDirectory: put into an existing directory (with or without a
// trailing slash) stores LOCAL's name in it, as cp does; a target whose
// directory is missing is refused before anything is stored, in coreutils
// words with a hint.
func TestPutIntoDirectory(t *testing.T) {
	dir := t.TempDir()
	startUp(t, dir, "--drives", "8", "--scheme", "4+2", "--unit", "64K", "--drive-size", "1G")
	src := filepath.Join(t.TempDir(), "data.bin")
	data := writeRandom(t, src, 700<<10+3)
	run(t, "mkdir", "-c", dir, "/d", "/e")
	run(t, "put", "-c", dir, "-q", src, "/d/")
	run(t, "put", "-c", dir, "-q", src, "/e")
	for _, p := range []string{"/d/data.bin", "/e/data.bin"} {
		got := filepath.Join(t.TempDir(), "got")
		run(t, "get", "-c", dir, "-q", p, got)
		if b, err := os.ReadFile(got); err != nil || !bytes.Equal(b, data) {
			t.Fatalf("%s: %d bytes, err %v; want the %d bytes put", p, len(b), err, len(data))
		}
	}
	if ls := run(t, "ls", "-c", dir, "/"); ls != "d/\ne/\n" {
		t.Fatalf("root after puts into directories:\n%s", ls)
	}
	out := fails(t, "put", "-c", dir, "-q", src, "/nope/x.bin")
	if want := "poolfs: cannot create '/nope/x.bin': No such file or directory\nTry 'poolfs mkdir -p /nope' first.\n"; out != want {
		t.Fatalf("put into a missing directory said:\n%s\nwant:\n%s", out, want)
	}
	out = fails(t, "put", "-c", dir, "-q", src, "/nope/")
	if !strings.Contains(out, "cannot store into '/nope/': No such file or directory") {
		t.Fatalf("put into a missing DIR/: %s", out)
	}
	run(t, "mkdir", "-c", dir, "-p", "/f/data.bin")
	out = fails(t, "put", "-c", dir, "-q", src, "/f")
	if !strings.Contains(out, "cannot overwrite directory '/f/data.bin': Is a directory") {
		t.Fatalf("put onto a directory's subdirectory of the same name: %s", out)
	}
	out = fails(t, "get", "-c", dir, "/nope.tar", filepath.Join(t.TempDir(), "x"))
	if out != "poolfs: cannot stat '/nope.tar': No such file or directory\n" {
		t.Fatalf("get of a missing file said: %q", out)
	}
	out = fails(t, "rm", "-c", dir, "/d")
	if !strings.Contains(out, "cannot remove '/d': Directory not empty\nTry 'poolfs rm -r /d'") {
		t.Fatalf("rm of a full directory said: %q", out)
	}
}

// TestGetFailureKeepsTarget: a get that fails (every drive corrupts every
// read, so no stripe can be decoded) leaves no file where there was none
// and the old content where there was one, and no temporary behind; after
// `drive fault heal` on every drive the same get succeeds byte for byte.
func TestGetFailureKeepsTarget(t *testing.T) {
	dir := t.TempDir()
	startUp(t, dir, "--drives", "8", "--scheme", "4+2", "--unit", "64K", "--drive-size", "1G")
	src := filepath.Join(t.TempDir(), "src")
	data := writeRandom(t, src, 1<<20+77)
	run(t, "put", "-c", dir, "-q", src, "/f")
	drives := []string{"d00", "d01", "d02", "d03", "d04", "d05", "d06", "d07"}
	for _, d := range drives {
		run(t, "drive", "fault", "-c", dir, d, "corrupt", "1")
	}
	local := t.TempDir()
	fresh, old := filepath.Join(local, "fresh"), filepath.Join(local, "old")
	os.WriteFile(old, []byte("old content"), 0o600)
	fails(t, "get", "-c", dir, "-q", "/f", fresh)
	fails(t, "get", "-c", dir, "-q", "/f", old)
	if _, err := os.Stat(fresh); !os.IsNotExist(err) {
		t.Fatalf("a failed get left %s behind (err %v)", fresh, err)
	}
	if b, _ := os.ReadFile(old); string(b) != "old content" {
		t.Fatalf("a failed get changed the existing target to %d bytes", len(b))
	}
	if ents, _ := os.ReadDir(local); len(ents) != 1 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Fatalf("after failed gets the directory holds %v, want only old", names)
	}

	for _, d := range drives {
		run(t, "drive", "fault", "-c", dir, d, "heal")
	}
	run(t, "get", "-c", dir, "-q", "/f", old)
	if b, _ := os.ReadFile(old); !bytes.Equal(b, data) {
		t.Fatalf("get after heal: %d bytes, want the %d put", len(b), len(data))
	}
	if st, _ := os.Stat(old); st.Mode().Perm() != 0o600 {
		t.Fatalf("get replaced a 0600 file with mode %v", st.Mode().Perm())
	}
	// get into a directory stores the file under its own name.
	run(t, "get", "-c", dir, "-q", "/f", local)
	if b, _ := os.ReadFile(filepath.Join(local, "f")); !bytes.Equal(b, data) {
		t.Fatalf("get into a directory: %d bytes", len(b))
	}
}

// TestHealClearsFaults: `drive fault heal` clears corruption and slowness
// too, so the survey after it finds no bad fragment; with corruption on, the
// survey runs to the end and names the drive.
func TestHealClearsFaults(t *testing.T) {
	dir := t.TempDir()
	startUp(t, dir, "--drives", "8", "--scheme", "4+2", "--unit", "64K", "--drive-size", "1G")
	survey := []string{"bench", "survey", "-c", dir, "--size", "1m", "--record", "256k", "--threads", "1"}
	run(t, "drive", "fault", "-c", dir, "d03", "corrupt", "1")
	out := run(t, survey...)
	// Every read of d03 has a bit flipped; a flip in a fragment's padding
	// (not covered by its CRCs) goes unseen, so not always all 4 are bad.
	if !regexp.MustCompile(`\| d03 \|.*\*\*BAD\*\*: [1-4] of 4 fragments read back corrupt`).MatchString(out) || strings.Count(out, "**BAD**") != 1 {
		t.Fatalf("survey with a corrupting d03:\n%s", out)
	}
	run(t, "drive", "fault", "-c", dir, "d03", "slow", "1h")
	run(t, "drive", "fault", "-c", dir, "d03", "heal")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b, err := exec.CommandContext(ctx, binary, survey...).CombinedOutput()
	if err != nil || strings.Contains(string(b), "BAD") || !strings.Contains(string(b), "| d03 |") {
		t.Fatalf("survey after heal (err %v):\n%s", err, b)
	}
}

// TestMountRefusesMountedPoint: a second mount on a poolfs mount point is
// refused at once, and the first mount stays the only one there.
func TestMountRefusesMountedPoint(t *testing.T) {
	requireFUSE(t)
	dir := t.TempDir()
	mnt := filepath.Join(t.TempDir(), "mnt")
	os.Mkdir(mnt, 0o755)
	up := startUp(t, dir, "--drives", "8", "--scheme", "4+2", "--unit", "64K", "--drive-size", "1G", "--mount", mnt)
	waitMounted(t, mnt, up.out.String)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "mount", "-c", dir, mnt)
	out, err := cmd.CombinedOutput()
	t.Cleanup(func() { detach(mnt) })
	if err == nil || ctx.Err() != nil || !strings.Contains(string(out), "poolfs is mounted there already") {
		t.Fatalf("second mount on %s: err %v (timeout %v):\n%s", mnt, err, ctx.Err(), out)
	}
	out, err = exec.CommandContext(ctx, binary, "mount", "-c", dir, "--background", mnt).CombinedOutput()
	if err == nil || ctx.Err() != nil || !strings.Contains(string(out), "poolfs is mounted there already") {
		t.Fatalf("second mount --background on %s: err %v (timeout %v):\n%s", mnt, err, ctx.Err(), out)
	}
	b, _ := os.ReadFile("/proc/self/mountinfo")
	if n := bytes.Count(b, []byte(" "+mnt+" ")); n != 1 {
		t.Fatalf("%d mounts on %s, want 1", n, mnt)
	}
	up.stop(t)
}

// TestPathsInsideMount: every path-taking command takes a path inside a
// poolfs mount of its cluster (absolute, or relative to a working
// directory in the mount) as the cluster path it shows; a path in a mount of
// another cluster is refused.
func TestPathsInsideMount(t *testing.T) {
	requireFUSE(t)
	dir := t.TempDir()
	mnt := filepath.Join(t.TempDir(), "mnt")
	os.Mkdir(mnt, 0o755)
	up := startUp(t, dir, "--drives", "8", "--scheme", "4+2", "--unit", "64K", "--drive-size", "1G", "--mount", mnt)
	waitMounted(t, mnt, up.out.String)
	ckpt := filepath.Join(mnt, "ckpt")
	if err := os.Mkdir(ckpt, 0o755); err != nil {
		t.Fatal(err)
	}
	if out := run(t, "setstripe", "-c", dir, ckpt, "--unit", "128K"); !strings.Contains(out, "unit 128.0 KiB") {
		t.Fatalf("setstripe through the mount: %s", out)
	}
	if out := run(t, "getstripe", "-c", dir, "/ckpt"); !strings.Contains(out, "unit 128.0 KiB") {
		t.Fatalf("getstripe of the cluster path after setstripe through the mount: %s", out)
	}
	src := filepath.Join(t.TempDir(), "src")
	data := writeRandom(t, src, 1<<20+9)
	run(t, "put", "-c", dir, "-q", src, ckpt+"/")
	if b, err := os.ReadFile(filepath.Join(ckpt, "src")); err != nil || !bytes.Equal(b, data) {
		t.Fatalf("file put through a mount path, read through the mount: %d bytes, err %v", len(b), err)
	}
	// Relative to a working directory inside the mount.
	rel := exec.Command(binary, "getstripe", "-c", dir, "src")
	rel.Dir = ckpt
	if out, err := rel.CombinedOutput(); err != nil || !strings.Contains(string(out), "unit 128.0 KiB") {
		t.Fatalf("getstripe of a relative path in the mount: %v\n%s", err, out)
	}
	if out := run(t, "stat", "-c", dir, filepath.Join(ckpt, "src")); !strings.Contains(out, "path:    /ckpt/src") {
		t.Fatalf("stat through the mount: %s", out)
	}
	run(t, "mkdir", "-c", dir, filepath.Join(mnt, "sub"))
	run(t, "mv", "-c", dir, filepath.Join(ckpt, "src"), filepath.Join(mnt, "sub", "moved"))
	name := "odd\nname"
	os.WriteFile(filepath.Join(mnt, "sub", name), []byte("x"), 0o644)
	if out := run(t, "ls", "-c", dir, "-b", filepath.Join(mnt, "sub")); out != "moved\nodd\\nname\n" {
		t.Fatalf("ls -b of the mount path: %q", out)
	}
	got := filepath.Join(t.TempDir(), "got")
	run(t, "get", "-c", dir, "-q", filepath.Join(mnt, "sub", "moved"), got)
	if b, _ := os.ReadFile(got); !bytes.Equal(b, data) {
		t.Fatalf("get of a mount path: %d bytes", len(b))
	}
	run(t, "rm", "-c", dir, "-r", filepath.Join(mnt, "sub"))
	if out := fails(t, "stat", "-c", dir, "/sub"); !strings.Contains(out, "No such file or directory") {
		t.Fatalf("rm -r of a mount path left it: %s", out)
	}
	// A relative path outside any mount is not taken as a cluster path.
	if out := fails(t, "ls", "-c", dir, "ckpt"); !strings.Contains(out, "relative path outside any poolfs mount") {
		t.Fatalf("ls of a relative path outside the mount: %s", out)
	}
	// Another cluster does not take this cluster's mount for its own.
	other := t.TempDir()
	startUp(t, other, "--drives", "8", "--scheme", "4+2", "--unit", "64K", "--drive-size", "1G")
	if out := fails(t, "ls", "-c", other, ckpt); !strings.Contains(out, "which is not a mount of the cluster in "+other) {
		t.Fatalf("ls of a path in another cluster's mount: %s", out)
	}
	// A `poolfs mount` (a client over RPC, given a relative mount point) is
	// found too, and only by its own cluster.
	base := t.TempDir()
	os.Mkdir(filepath.Join(base, "mnt2"), 0o755)
	mnt2 := filepath.Join(base, "mnt2")
	m2 := exec.Command(binary, "mount", "-c", other, "mnt2")
	m2.Dir = base
	var m2out bytes.Buffer
	m2.Stdout, m2.Stderr = &m2out, &m2out
	if err := m2.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m2.Process.Kill(); m2.Wait() })
	waitMounted(t, mnt2, m2out.String)
	run(t, "mkdir", "-c", other, filepath.Join(mnt2, "o"))
	if out := run(t, "ls", "-c", other, mnt2); out != "o/\n" {
		t.Fatalf("ls of the other cluster's mount: %q", out)
	}
	if out := fails(t, "ls", "-c", dir, mnt2); !strings.Contains(out, "which is not a mount of the cluster in "+dir) {
		t.Fatalf("ls of the other cluster's mount with this cluster: %s", out)
	}
	up.stop(t)
}

// TestCLIRefusals: setstripe refuses --mirror 0 and layouts without
// redundancy unless forced; bench refuses a --dir that does not exist
// rather than creating it; version names the build.
func TestCLIRefusals(t *testing.T) {
	dir := t.TempDir()
	startUp(t, dir, "--drives", "8", "--scheme", "4+2", "--unit", "64K", "--drive-size", "1G")
	run(t, "mkdir", "-c", dir, "/s")
	before := run(t, "getstripe", "-c", dir, "/s")
	if out := fails(t, "setstripe", "-c", dir, "/s", "--mirror", "0"); !strings.Contains(out, "--mirror 0: want at least 1 copy") {
		t.Fatalf("setstripe --mirror 0: %s", out)
	}
	for _, args := range [][]string{{"--scheme", "4+0"}, {"--mirror", "1"}} {
		out := fails(t, append([]string{"setstripe", "-c", dir, "/s"}, args...)...)
		if !strings.Contains(out, "keeps no redundancy") || !strings.Contains(out, "--force") {
			t.Fatalf("setstripe %v: %s", args, out)
		}
	}
	if after := run(t, "getstripe", "-c", dir, "/s"); after != before {
		t.Fatalf("refused setstripes changed the layout: %s -> %s", before, after)
	}
	if out := run(t, "setstripe", "-c", dir, "/s", "--scheme", "4+0", "--force"); !strings.Contains(out, "ec 4+0") || !strings.Contains(out, "warning") {
		t.Fatalf("setstripe --scheme 4+0 --force: %s", out)
	}

	missing := filepath.Join(t.TempDir(), "not-mounted", "poolfs")
	if out := fails(t, "bench", "ior", "--dir", missing, "-b", "1m"); !strings.Contains(out, "does not exist") {
		t.Fatalf("bench ior on a missing dir: %s", out)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Fatalf("bench ior created its missing --dir: %v", err)
	}
	local := t.TempDir()
	if out := run(t, "bench", "ior", "--dir", local, "-b", "1m"); !strings.Contains(out, "note: --dir "+local+" is on ") || !strings.Contains(out, "not in a poolfs mount") {
		t.Fatalf("bench ior on a local directory says nothing of where it is:\n%s", out)
	}
	if out := fails(t, "bench", "ior", "--api", "poolfs", "-c", dir, "--direct", "-b", "1m"); !strings.Contains(out, "O_DIRECT") || !strings.Contains(out, "posix") {
		t.Fatalf("bench ior --direct through the poolfs API: %s", out)
	}
	if out := fails(t, "bench", "ior", "--dir", local, "--direct", "-t", "6k", "-b", "6k"); !strings.Contains(out, "not a multiple of 4096") {
		t.Fatalf("bench ior --direct with a 6k transfer: %s", out)
	}
	if out := run(t, "bench", "ior", "--dir", local, "--direct", "-t", "64k", "-b", "1m", "--tasks", "2", "-C"); !strings.Contains(out, "O_DIRECT") {
		t.Fatalf("bench ior --direct does not say O_DIRECT in its report:\n%s", out)
	}

	for _, args := range [][]string{{"version"}, {"--version"}} {
		if out := run(t, args...); !strings.HasPrefix(out, "poolfs ") || !strings.Contains(out, " go1.") {
			t.Fatalf("poolfs %v: %q", args, out)
		}
	}
}
