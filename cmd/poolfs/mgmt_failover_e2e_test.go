package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"poolfs/internal/netlab"
)

// TestMgmtFailover runs two management services over one PostgreSQL, each
// on its own host, with a metadata server, three storage servers and a
// client that mounts. The first leads, the second stands by. While the
// client writes and reads back files, the leader is killed (SIGKILL): the
// standby leads within 10 s, the client sees no error, every file reads
// back byte for byte, and the client's status comes from the new leader.
func TestMgmtFailover(t *testing.T) {
	lab := netlab.New(t)
	pg, m1, m2, md, c1 := lab.AddHost("pg"), lab.AddHost("mgmt1"), lab.AddHost("mgmt2"), lab.AddHost("meta"), lab.AddHost("c1")
	var srv []*netlab.Host
	for i := range 3 {
		srv = append(srv, lab.AddHost(fmt.Sprintf("s%d", i+1)))
	}
	root := t.TempDir()
	dir := func(host string) string { return filepath.Join(root, host) }

	db := startLabPostgres(t, pg, m1)
	token := createLabCluster(t, m1, dir("mgmt1"), m1.Addr(9401)+","+m2.Addr(9401))
	runOn(t, m2, "-c", dir("mgmt2"), "cluster", "join", "--token-file", token)
	leader := startDaemon(t, m1, "mgmt1", "poolfs mgmt: leading", "-c", dir("mgmt1"), "mgmt", "--db", db, "--listen", m1.Addr(9401))
	standby := startDaemon(t, m2, "mgmt2", "poolfs mgmt: standing by; the leader is "+m1.Addr(9401),
		"-c", dir("mgmt2"), "mgmt", "--db", db, "--listen", m2.Addr(9401))
	startDaemon(t, md, "meta", "poolfs meta: serving", "-c", dir("meta"), "meta", "--join-file", token, "--db", db, "--listen", md.Addr(9402))
	for _, h := range srv {
		args := []string{"-c", dir(h.Name), "storage", "--join-file", token, "--server", h.Name, "--listen", h.Addr(9500), "--drive-size", "256M"}
		for d := range 3 {
			args = append(args, "--drive", filepath.Join(dir(h.Name), fmt.Sprintf("d%d", d)))
		}
		startDaemon(t, h, h.Name, "poolfs storage "+h.Name+": serving", args...)
	}
	runOn(t, c1, "-c", dir("c1"), "cluster", "join", "--token-file", token)
	if out := runOn(t, c1, "-c", dir("c1"), "cluster", "pool", "default", "--scheme", "4+2", "--unit", "256K"); !strings.Contains(out, "over 9 drives of 3 servers") {
		t.Fatalf("pool create: %s", out)
	}
	mnt := filepath.Join(root, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = exec.Command("fusermount3", "-u", "-z", mnt).Run() })
	startDaemon(t, c1, "mount", "poolfs mounted on", "-c", dir("c1"), "mount", mnt)

	// The client writes and reads back files until told to stop; the
	// leader is killed once it is under way.
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex // guards errs and written
		errs    []error
		written []labFile
	)
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(written) }
	stop, started := make(chan struct{}), make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for j := 0; ; j++ {
			select {
			case <-stop:
				return
			default:
			}
			f := newLabFile(fmt.Sprintf("f%d", j), 1<<20+j*4099, uint64(j+1))
			err := os.WriteFile(filepath.Join(mnt, f.name), f.data, 0o644)
			if err == nil {
				err = checkFile(mnt, f)
			}
			mu.Lock()
			if err != nil {
				errs = append(errs, err)
			} else {
				written = append(written, f)
			}
			mu.Unlock()
			if err != nil {
				return
			}
			if j == 0 {
				close(started)
			}
		}
	}()
	<-started
	if err := leader.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	waitOutput(t, standby, "poolfs mgmt: leading", 10*time.Second)
	t.Logf("the standby leads %v after the leader was killed", time.Since(killed).Round(100*time.Millisecond))
	// The client's status (the management service's) comes from the new
	// leader, and the client writes on.
	st := runOn(t, c1, "-c", dir("c1"), "status")
	if !strings.Contains(st, "health: HEALTHY") {
		t.Errorf("status through the new leader:\n%s", st)
	}
	failed := func() bool { mu.Lock(); defer mu.Unlock(); return len(errs) > 0 }
	for n := count(); count() < n+2 && !failed(); { // and writes on under the new leader
		if time.Since(killed) > 20*time.Second {
			t.Fatal("the client wrote nothing under the new leader")
		}
		time.Sleep(50 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	for _, err := range errs {
		t.Errorf("client: %v", err)
	}
	n := 0
	for _, f := range written {
		if err := checkFile(mnt, f); err != nil {
			t.Error(err)
		}
		n += len(f.data)
	}
	t.Logf("%d files, %d bytes written and read back across the failover", len(written), n)
}

// waitOutput waits until daemon d has printed marker.
func waitOutput(t *testing.T, d *daemon, marker string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !strings.Contains(d.out.String(), marker) {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not print %q within %v:\n%s", d.name, marker, within, d.out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
