package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// tourLines returns the commands of the README's tour: the lines of the
// fenced block between <!-- tour:begin --> and <!-- tour:end -->, without
// comments and blank lines.
func tourLines(t *testing.T) []string {
	t.Helper()
	f, err := os.Open("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.TrimSpace(l) == "<!-- tour:begin -->":
			in = true
		case strings.TrimSpace(l) == "<!-- tour:end -->":
			in = false
		case in && !strings.HasPrefix(l, "```"):
			if i := strings.Index(l, " #"); i >= 0 {
				l = l[:i]
			}
			if l = strings.TrimSpace(l); l != "" {
				lines = append(lines, l)
			}
		}
	}
	if len(lines) < 20 {
		t.Fatalf("README tour: found %d commands between the tour markers", len(lines))
	}
	return lines
}

// TestReadmeTour runs the README's tour, line by line and in order, against
// a fresh cluster, as a user following it would: bin/poolfs is the binary
// under test, /mnt/poolfs and /tmp/ are directories of the test. Every line
// must succeed; the tour's own cmp lines check the data byte for byte.
func TestReadmeTour(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the tour mounts FUSE: needs root")
	}
	dir := t.TempDir()
	work := t.TempDir()
	mnt := filepath.Join(work, "mnt", "poolfs")
	startUp(t, dir, "--drives", "12", "--drive-size", "2G")
	t.Cleanup(func() {
		if exec.Command("mountpoint", "-q", mnt).Run() == nil {
			exec.Command("umount", "-l", mnt).Run()
		}
	})
	// The benchmarks of the tour run at a quarter of their sizes or less:
	// the lines run as written otherwise, and the race detector makes
	// the full sizes take a minute and a half.
	r := strings.NewReplacer("bin/poolfs", binary, "/mnt/poolfs", mnt, "/tmp/", work+"/",
		" -b 64m ", " -b 16m ", " -n 1000 ", " -n 200 ", " --size 16m", " --size 4m")
	for i, line := range tourLines(t) {
		cmdline := r.Replace(line)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", cmdline)
		cmd.Dir = work
		cmd.Env = append(os.Environ(), "POOLFS_DIR="+dir)
		start := time.Now()
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("tour line %d: %s\n%v after %v\n%s", i+1, line, err, time.Since(start).Round(time.Millisecond), out)
		}
		t.Logf("tour line %d (%v): %s", i+1, time.Since(start).Round(time.Millisecond), line)
	}
	if exec.Command("mountpoint", "-q", mnt).Run() == nil {
		t.Fatal("the tour ends with umount, but the mount is still there")
	}
}
