package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"poolfs/internal/client"
	"poolfs/internal/cluster"
	"poolfs/internal/mgmt"
)

// TestRebuildResumesAfterRestart fails a drive of a `poolfs up` whose
// drives are slow emulated HDDs, kills the process in the middle of the
// rebuild, starts it again (without the drive-model flags: the model is in
// the map) and checks that the rebuild resumes, finishes, and every byte
// reads back.
func TestRebuildResumesAfterRestart(t *testing.T) {
	dir := t.TempDir()
	up := startUp(t, dir, "--drives", "12", "--drive-size", "1G", "--unit", "64K",
		"--drive-model", "hdd-7200", "--drive-speed-scale", "0.1")
	src := filepath.Join(t.TempDir(), "src")
	data := writeRandom(t, src, 24<<20+12345)
	run(t, "put", "-c", dir, src, "/big.bin")
	run(t, "pool", "set", "-c", dir, "rebuild-priority", "lowest")
	run(t, "drive", "fail", "-c", dir, "d03")

	ctx := context.Background()
	rebuild := func() *mgmt.RebuildStatus {
		conn, err := cluster.Connect(ctx, dir, client.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		st, err := conn.Mgmt.Rebuild(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	deadline := time.Now().Add(60 * time.Second)
	for st := rebuild(); !(st.Active && st.Done > 0); st = rebuild() {
		if time.Now().After(deadline) {
			t.Fatalf("rebuild did not start: %+v\n%s", st, up.out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	st := rebuild()
	if st.Done >= st.Tasks {
		t.Fatalf("rebuild finished before the restart: %+v", st)
	}
	t.Logf("killing poolfs up at %d/%d tasks", st.Done, st.Tasks)
	up.kill()

	up = startUp(t, dir)
	run(t, "pool", "set", "-c", dir, "rebuild-priority", "highest")
	deadline = time.Now().Add(120 * time.Second)
	for {
		st := rebuild()
		if !st.Active && st.Stripes > 0 && st.Degraded+st.Critical+st.Misplaced == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("rebuild did not finish after restart: %+v\n%s", st, up.out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	ev := run(t, "events", "-c", dir)
	if strings.Count(ev, "rebuild.start") < 2 || !strings.Contains(ev, "rebuild.done") || !strings.Contains(ev, "drive.failed") {
		t.Fatalf("events after the resumed rebuild:\n%s", ev)
	}
	status := run(t, "status", "-c", dir)
	if !strings.Contains(status, "degraded 0, critical 0") {
		t.Fatalf("status after rebuild:\n%s", status)
	}
	out := filepath.Join(t.TempDir(), "out")
	run(t, "get", "-c", dir, "/big.bin", out)
	got := readFile(t, out)
	if !bytes.Equal(got, data) {
		t.Fatalf("content after resumed rebuild differs (%d bytes, want %d)", len(got), len(data))
	}
	up.stop(t)
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRebuildWatchWaitsForTheRebuild runs `rebuild watch` straight after
// `drive fail`, before the coordinator has scanned the new map, as a script
// (and the README's tour) does: watch must return only once that rebuild
// has run, so that every stripe is whole when it returns.
func TestRebuildWatchWaitsForTheRebuild(t *testing.T) {
	dir := t.TempDir()
	startUp(t, dir, "--drives", "12", "--drive-size", "1G", "--unit", "64K",
		"--drive-model", "hdd-7200", "--drive-speed-scale", "0.5")
	src := filepath.Join(t.TempDir(), "src")
	writeRandom(t, src, 8<<20)
	run(t, "put", "-c", dir, src, "/f.bin")
	for _, d := range []string{"d03", "d05"} {
		run(t, "drive", "fail", "-c", dir, d)
		run(t, "rebuild", "watch", "-c", dir)
		ev := run(t, "events", "-c", dir)
		if strings.Count(ev, "rebuild.done") < map[string]int{"d03": 1, "d05": 2}[d] {
			t.Fatalf("rebuild watch returned after failing %s before the rebuild ended:\n%s", d, ev)
		}
		conn, err := cluster.Connect(context.Background(), dir, client.Options{})
		if err != nil {
			t.Fatal(err)
		}
		st, err := conn.Mgmt.Rebuild(context.Background())
		conn.Close()
		if err != nil {
			t.Fatal(err)
		}
		if st.Stripes == 0 || st.Degraded+st.Critical+st.Misplaced != 0 {
			t.Fatalf("after rebuild watch (%s failed): %+v", d, st)
		}
	}
}
