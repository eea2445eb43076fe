package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"poolfs/internal/mgmt"
	"poolfs/internal/testlog"
)

// TestJobStatsAttribution: two processes with different job variables
// write through a real `poolfs mount` (a process of its own, reporting
// over its RPC connection), one also reads; `poolfs status --json` and
// `poolfs top --once` show each job's bytes exactly.
func TestJobStatsAttribution(t *testing.T) {
	requireFUSE(t)
	dir := t.TempDir()
	mnt := filepath.Join(t.TempDir(), "mnt")
	os.Mkdir(mnt, 0o755)
	startUp(t, dir, "--drives", "8", "--scheme", "4+2", "--unit", "64K", "--drive-size", "1G")
	m := exec.Command(binary, "mount", "-c", dir, "--stats-interval", "100ms", mnt)
	var out testlog.Buffer
	m.Stdout, m.Stderr = &out, &out
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Process.Kill(); m.Wait() })
	waitMounted(t, mnt, out.String)

	// Job 1001 (Slurm) writes 3,000,000 bytes; job 77.pbs (PBS, the
	// fallback) writes 1,234,567 and reads the first file with O_DIRECT.
	a, b := filepath.Join(mnt, "a"), filepath.Join(mnt, "b")
	sh := func(env []string, script string) {
		t.Helper()
		c := exec.Command("sh", "-c", script)
		c.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
		if o, err := c.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", script, err, o)
		}
	}
	sh([]string{"SLURM_JOB_ID=1001"}, fmt.Sprintf("head -c 3000000 /dev/urandom > %s", a))
	sh([]string{"PBS_JOBID=77.pbs", "SLURM_JOB_ID="}, fmt.Sprintf("head -c 1234567 /dev/urandom > %s && dd if=%s of=/dev/null bs=1M iflag=direct status=none", b, a))

	want := map[string][2]uint64{"1001": {0, 3000000}, "77.pbs": {3000000, 1234567}} // read, written
	var snap mgmt.Status
	deadline := time.Now().Add(20 * time.Second)
	for {
		if err := json.Unmarshal([]byte(run(t, "status", "-c", dir, "--json")), &snap); err != nil {
			t.Fatal(err)
		}
		got := map[string][2]uint64{}
		if snap.IO != nil {
			for _, j := range snap.IO.Jobs {
				if _, ok := want[j.Name]; ok {
					got[j.Name] = [2]uint64{j.ReadBytes, j.WriteBytes}
				}
			}
		}
		if fmt.Sprint(got) == fmt.Sprint(want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("jobs' [read, written] bytes %v, want %v\n%+v", got, want, snap.IO)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var client *struct{ r, w uint64 }
	for _, c := range snap.IO.Clients {
		if c.Mount == mnt {
			client = &struct{ r, w uint64 }{c.ReadBytes, c.WriteBytes}
		}
	}
	if client == nil || client.w != 3000000+1234567 || client.r < 3000000 {
		t.Fatalf("client %s: %+v in %+v", mnt, client, snap.IO.Clients)
	}
	top := run(t, "top", "-c", dir, "--once", "--jobs", "0")
	for _, s := range []string{"JOB", "1001", "77.pbs", mnt} {
		if !strings.Contains(top, s) {
			t.Fatalf("poolfs top lacks %q:\n%s", s, top)
		}
	}
}
