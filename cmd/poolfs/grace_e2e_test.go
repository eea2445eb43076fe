package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// driveLine returns the `poolfs status` row of a drive.
func driveLine(t *testing.T, dir, id string) string {
	t.Helper()
	for _, l := range strings.Split(run(t, "status", "-c", dir), "\n") {
		if strings.HasPrefix(l, id+" ") {
			return l
		}
	}
	t.Fatalf("status has no row for %s", id)
	return ""
}

func waitDriveLine(t *testing.T, dir, id string, re *regexp.Regexp) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		l := driveLine(t, dir, id)
		if re.MatchString(l) {
			return l
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %q does not match %s", id, l, re)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestDownDrivesCLI: a drive that goes offline is down, not failed, shown
// with the grace left; a restart of the cluster (its storage server comes
// back) brings it up again; one that stays away past the grace is failed;
// data reads back throughout.
func TestDownDrivesCLI(t *testing.T) {
	dir := t.TempDir()
	up := startUp(t, dir, "--drives", "12", "--drive-size", "1G", "--unit", "64K")
	src := filepath.Join(t.TempDir(), "src")
	data := writeRandom(t, src, 2<<20+77)
	get := func(p string, want []byte) {
		t.Helper()
		dst := filepath.Join(t.TempDir(), "dst")
		run(t, "get", "-c", dir, p, dst)
		if got, err := os.ReadFile(dst); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s reads back wrong (%v)", p, err)
		}
	}
	run(t, "put", "-c", dir, src, "/before.bin")
	if out := run(t, "pool", "set", "-c", dir, "down-grace", "1h"); !strings.Contains(out, "after 1h0m0s") {
		t.Fatalf("pool set down-grace: %s", out)
	}
	if out := run(t, "drive", "fault", "-c", dir, "d04", "offline"); !strings.Contains(out, "d04 is down") {
		t.Fatalf("drive fault offline: %s", out)
	}
	if l := driveLine(t, dir, "d04"); !regexp.MustCompile(`down \(failed in (59m\d+s|1h0m0s) unless it answers\)`).MatchString(l) {
		t.Fatalf("status row of the down drive: %q", l)
	}
	run(t, "put", "-c", dir, src, "/during.bin")
	get("/before.bin", data)
	get("/during.bin", data)

	// The cluster restarts (its storage server with it): the drive answers
	// again and is up, not rebuilt.
	up.stop(t)
	startUp(t, dir)
	waitDriveLine(t, dir, "d04", regexp.MustCompile(`^d04\s+s0\s+up\s`))
	events := run(t, "events", "-c", dir)
	if !strings.Contains(events, "drive.down") || !strings.Contains(events, "drive.up") || strings.Contains(events, "drive.failed") {
		t.Fatalf("events after the restart:\n%s", events)
	}
	get("/before.bin", data)
	get("/during.bin", data)

	// Past the grace: failed and rebuilt.
	run(t, "pool", "set", "-c", dir, "down-grace", "2s")
	run(t, "drive", "fault", "-c", dir, "d05", "offline")
	waitDriveLine(t, dir, "d05", regexp.MustCompile(`^d05\s+s0\s+failed`))
	get("/before.bin", data)
	get("/during.bin", data)

	for _, bad := range [][]string{
		{"pool", "set", "-c", dir, "down-grace", "0s"},
		{"pool", "set", "-c", dir, "down-grace", "soon"},
		{"drive", "fault", "-c", dir, "d05", "unplugged"},
	} {
		out, err := exec.Command(binary, bad...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "want") {
			t.Errorf("poolfs %s: %v, %s; want a clear error", strings.Join(bad, " "), err, out)
		}
	}
}
