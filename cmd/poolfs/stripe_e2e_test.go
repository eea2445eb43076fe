package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSmallFilesAndNarrowLayouts drives the layouts of issue 3 through the
// CLI: a small file under an 8+2 directory is a 3-copy mirror, a narrow 4+2
// layout and a --mirror 3 layout are inherited by new files and
// subdirectories, and `pool set small-file-threshold 0` turns mirroring of
// small files off.
func TestSmallFilesAndNarrowLayouts(t *testing.T) {
	dir := t.TempDir()
	startUp(t, dir, "--drives", "12", "--scheme", "8+2", "--unit", "64K", "--drive-size", "1G")
	tmp := t.TempDir()
	small := filepath.Join(tmp, "small")
	smallData := writeRandom(t, small, 4096)
	big := filepath.Join(tmp, "big")
	writeRandom(t, big, 600<<10)

	run(t, "put", "-c", dir, small, "/small")
	out := run(t, "getstripe", "-c", dir, "/small")
	if !strings.Contains(out, "ec 8+2") || !strings.Contains(out, "stripe 0: mirror 3 (small file)") {
		t.Fatalf("getstripe of a small file: %s", out)
	}

	run(t, "mkdir", "-c", dir, "/n")
	if out := run(t, "setstripe", "-c", dir, "/n", "--scheme", "4+2"); !strings.Contains(out, "ec 4+2") {
		t.Fatalf("setstripe 4+2: %s", out)
	}
	run(t, "put", "-c", dir, big, "/n/big")
	out = run(t, "getstripe", "-c", dir, "/n/big")
	if !strings.Contains(out, "pool 0, ec 4+2") || !strings.Contains(out, "stripe 2: ec 4+2") {
		t.Fatalf("getstripe of a 4+2 file: %s", out)
	}

	run(t, "mkdir", "-c", dir, "/m")
	if out := run(t, "setstripe", "-c", dir, "/m", "--mirror", "3"); !strings.Contains(out, "mirror 3") {
		t.Fatalf("setstripe --mirror 3: %s", out)
	}
	run(t, "mkdir", "-c", dir, "/m/sub")
	run(t, "put", "-c", dir, big, "/m/sub/big")
	out = run(t, "getstripe", "-c", dir, "--all", "/m/sub/big")
	if !strings.Contains(out, "pool 0, mirror 3") || !strings.Contains(out, "stripe 9: mirror 3,") || strings.Contains(out, "ec ") {
		t.Fatalf("getstripe of a file under a mirror directory: %s", out)
	}
	if out, err := exec.Command(binary, "setstripe", "-c", dir, "/m", "--mirror", "11").CombinedOutput(); err == nil {
		t.Fatalf("setstripe --mirror 11 on a 10-wide pool succeeded: %s", out)
	}

	if out := run(t, "pool", "set", "-c", dir, "small-file-threshold", "0"); !strings.Contains(out, "small-file threshold 0") {
		t.Fatalf("pool set small-file-threshold: %s", out)
	}
	run(t, "put", "-c", dir, small, "/small2")
	out = run(t, "getstripe", "-c", dir, "/small2")
	if !strings.Contains(out, "stripe 0: ec 8+2") {
		t.Fatalf("getstripe with the threshold off: %s", out)
	}
	got := filepath.Join(tmp, "got")
	run(t, "get", "-c", dir, "/small", got)
	if b, err := os.ReadFile(got); err != nil || !bytes.Equal(b, smallData) {
		t.Fatalf("get /small: %d bytes, err %v", len(b), err)
	}
	if _, err := exec.Command(binary, "pool", "set", "-c", dir, "small-file-threshold", "-5").CombinedOutput(); err == nil {
		t.Fatal("pool set small-file-threshold -5 succeeded")
	}
}
