package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

type sessionsOut struct {
	Sessions []struct {
		ID    uint64 `json:"id"`
		Mount string `json:"mount"`
		Opens int    `json:"opens"`
	} `json:"sessions"`
	Orphans []uint64 `json:"orphans"`
}

func sessions(t *testing.T, dir string) sessionsOut {
	t.Helper()
	var s sessionsOut
	if err := json.Unmarshal([]byte(run(t, "sessions", "-c", dir, "--json")), &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestKilledMountLeavesNothingStale holds a file open through a separate
// `poolfs mount`, unlinks it (an orphan: its data must stay while open),
// SIGKILLs the mount, and checks that once the mount's session lease runs
// out the orphan is destroyed and its fragments collected, while a file
// held open by a live mount stays.
func TestKilledMountLeavesNothingStale(t *testing.T) {
	requireFUSE(t)
	dir := t.TempDir()
	startUp(t, dir, "--drives", "8", "--scheme", "4+2", "--unit", "64K", "--drive-size", "1G")
	mount := func(name string) (string, *exec.Cmd) {
		mnt := filepath.Join(t.TempDir(), name)
		os.Mkdir(mnt, 0o755)
		cmd := exec.Command(binary, "mount", "-c", dir, "--session-ttl", "1s", mnt)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		waitMounted(t, mnt, out.String)
		return mnt, cmd
	}
	killed, kcmd := mount("killed")
	live, _ := mount("live")
	data := bytes.Repeat([]byte("orphan data "), 300000)
	hold := func(mnt, name string) *os.File {
		if err := os.WriteFile(filepath.Join(mnt, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(filepath.Join(mnt, name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		if err := os.Remove(filepath.Join(mnt, name)); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(data)+1)
		n, _ := f.ReadAt(got, 0)
		if !bytes.Equal(got[:n], data) {
			t.Fatalf("unlinked open file %s reads %d bytes, want its %d", name, n, len(data))
		}
		return f
	}
	hold(killed, "a")
	lf := hold(live, "b")
	if raw, frags := usage(t, dir); raw == 0 || frags == 0 {
		t.Fatalf("the open orphans hold no data: %d raw bytes, %d fragments", raw, frags)
	}
	s := sessions(t, dir)
	if len(s.Sessions) != 2 || len(s.Orphans) != 2 {
		t.Fatalf("before the kill: %+v", s)
	}
	for _, ss := range s.Sessions {
		if ss.Opens != 1 {
			t.Fatalf("session %+v: want 1 open file", ss)
		}
	}

	kcmd.Process.Signal(syscall.SIGKILL)
	kcmd.Wait()
	detach(killed)
	deadline := time.Now().Add(30 * time.Second)
	for {
		s = sessions(t, dir)
		if len(s.Sessions) == 1 && len(s.Orphans) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the killed mount's session and orphan were not reclaimed: %+v", s)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if s.Sessions[0].Mount != live {
		t.Fatalf("the live mount's session went: %+v", s)
	}
	// The live mount renews its lease: its orphan stays readable well past
	// the lease, then goes at close.
	time.Sleep(2500 * time.Millisecond)
	got := make([]byte, len(data))
	if _, err := lf.ReadAt(got, 0); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("live mount's open unlinked file after the lease time: %v", err)
	}
	lf.Close()
	deadline = time.Now().Add(10 * time.Second)
	for s = sessions(t, dir); len(s.Orphans) != 0; s = sessions(t, dir) {
		if time.Now().After(deadline) {
			t.Fatalf("orphan not destroyed after close: %+v", s)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Collected: nothing of either file is left on the drives.
	run(t, "gc", "-c", dir)
	if raw, frags := usage(t, dir); raw != 0 || frags != 0 {
		t.Fatalf("after both orphans went: %d raw bytes committed, %d fragments on the drives", raw, frags)
	}
}

// usage returns the raw bytes committed in the first pool and the
// fragments stored on all drives.
func usage(t *testing.T, dir string) (raw uint64, frags int64) {
	t.Helper()
	var st struct {
		Drives []struct {
			Fragments int64 `json:"fragments"`
		} `json:"drives"`
		Pools []struct {
			UsedRaw uint64 `json:"used_raw"`
		} `json:"pools"`
	}
	if err := json.Unmarshal([]byte(run(t, "status", "-c", dir, "--json")), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Pools) == 0 || len(st.Drives) == 0 {
		t.Fatalf("status has no pools or drives")
	}
	for _, d := range st.Drives {
		frags += d.Fragments
	}
	return st.Pools[0].UsedRaw, frags
}
