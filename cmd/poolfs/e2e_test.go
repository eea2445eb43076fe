package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"poolfs/internal/testlog"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"poolfs/internal/client"
	"poolfs/internal/cluster"
	"poolfs/internal/erasure"
	"poolfs/internal/meta"
	"poolfs/internal/placement"
	"poolfs/internal/rpc"
	"poolfs/internal/storage"
	"poolfs/internal/testbin"
)

var binary string

func TestMain(m *testing.M) { testbin.Main(m, &binary) }

// upProc is a running `poolfs up`.
type upProc struct {
	cmd *exec.Cmd
	out *testlog.Buffer
}

// startUp starts `poolfs up` on dir and waits until it serves.
func startUp(t *testing.T, dir string, args ...string) *upProc {
	t.Helper()
	return startUpEnv(t, nil, dir, args...)
}

// startUpEnv is startUp with env added to the process's environment.
func startUpEnv(t *testing.T, env []string, dir string, args ...string) *upProc {
	t.Helper()
	os.Remove(filepath.Join(dir, "cluster.json"))
	all := append([]string{"up", "-c", dir, "--listen", "127.0.0.1:0"}, args...)
	cmd := exec.Command(binary, all...)
	cmd.Env = append(os.Environ(), env...)
	var out testlog.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &upProc{cmd: cmd, out: &out}
	t.Cleanup(func() {
		if t.Failed() && p.cmd.ProcessState == nil { // the cluster's events tell why
			ev, _ := exec.Command(binary, "events", "-c", dir, "--last", "40").CombinedOutput()
			t.Logf("poolfs events:\n%s", ev)
		}
		p.kill()
		if t.Failed() { // and so does what it logged
			t.Logf("poolfs up (pid %d) printed:\n%s", cmd.Process.Pid, tail(out.String(), 16<<10))
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if info, _, err := cluster.ReadInfo(dir); err == nil && info.PID == cmd.Process.Pid {
			return p
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("poolfs up did not start: %s", out.String())
	return nil
}

// tail returns the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

func (p *upProc) kill() {
	if p.cmd.ProcessState == nil {
		p.cmd.Process.Signal(syscall.SIGKILL)
		p.cmd.Wait()
	}
}

func (p *upProc) stop(t *testing.T) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("poolfs up did not stop cleanly: %v\n%s", err, p.out)
	}
}

func run(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(binary, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("poolfs %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func writeRandom(t *testing.T, path string, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	rand.Read(b)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCLITour(t *testing.T) {
	dir := t.TempDir()
	up := startUp(t, dir, "--drives", "12", "--drive-size", "1G", "--unit", "64K")
	src := filepath.Join(t.TempDir(), "src")
	data := writeRandom(t, src, 3<<20+5)
	run(t, "mkdir", "-c", dir, "-p", "/proj/run1")
	run(t, "put", "-c", dir, src, "/proj/run1/data.bin")
	run(t, "mv", "-c", dir, "/proj/run1/data.bin", "/proj/data.bin")
	ls := run(t, "ls", "-c", dir, "-l", "/proj")
	if !strings.Contains(ls, "data.bin") || !strings.Contains(ls, "run1/") {
		t.Fatalf("ls: %s", ls)
	}
	st := run(t, "stat", "-c", dir, "/proj/data.bin")
	for _, want := range []string{"size:    3145733", "ec 8+2", "stripes: 7 of 7 allocated", "| d"} {
		if !strings.Contains(st, want) {
			t.Fatalf("stat output lacks %q:\n%s", want, st)
		}
	}
	dst := filepath.Join(t.TempDir(), "dst")
	run(t, "get", "-c", dir, "/proj/data.bin", dst)
	if got, _ := os.ReadFile(dst); !bytes.Equal(got, data) {
		t.Fatal("get returned different bytes")
	}
	var status struct {
		Health string
		Pools  []struct {
			Drives  int    `json:"drives"`
			UsedRaw uint64 `json:"used_raw"`
			Written int64  `json:"written"`
		}
		Drives []struct {
			ID      string
			Written int64 `json:"written"`
		}
	}
	if err := json.Unmarshal([]byte(run(t, "status", "-c", dir, "--json")), &status); err != nil {
		t.Fatal(err)
	}
	if status.Health != "healthy" || len(status.Drives) != 12 || len(status.Pools) != 1 || status.Pools[0].UsedRaw == 0 {
		t.Fatalf("status: %+v", status)
	}
	// Bytes written to the drives: per drive, summed per pool, and at
	// least the committed fragments (the put wrote each of them once).
	var drivesWritten int64
	for _, d := range status.Drives {
		drivesWritten += d.Written
	}
	if p := status.Pools[0]; p.Written != drivesWritten || p.Written < int64(p.UsedRaw) {
		t.Fatalf("written: pool %d, drives %d, committed raw %d", p.Written, drivesWritten, p.UsedRaw)
	}
	human := run(t, "status", "-c", dir)
	for _, want := range []string{"health: HEALTHY", "preservation", "PG balance", "d11"} {
		if !strings.Contains(human, want) {
			t.Fatalf("status lacks %q:\n%s", want, human)
		}
	}
	// A second pool, used by one directory.
	out := run(t, "pool", "create", "-c", dir, "fast", "--drives", "8", "--scheme", "4+2", "--unit", "64K", "--drive-size", "256M")
	if !strings.Contains(out, `pool 1 "fast": declustered, ec 4+2`) {
		t.Fatalf("pool create: %s", out)
	}
	run(t, "mkdir", "-c", dir, "--pool", "fast", "/proj/fast")
	run(t, "put", "-c", dir, src, "/proj/fast/data.bin")
	st = run(t, "stat", "-c", dir, "/proj/fast/data.bin")
	if !strings.Contains(st, "pool 1, ec 4+2") || !strings.Contains(st, "d12") && !strings.Contains(st, "d19") {
		t.Fatalf("file in the second pool: %s", st)
	}
	run(t, "get", "-c", dir, "/proj/fast/data.bin", dst)
	if got, _ := os.ReadFile(dst); !bytes.Equal(got, data) {
		t.Fatal("get from the second pool returned different bytes")
	}
	run(t, "rm", "-c", dir, "-r", "/proj")
	if out, err := exec.Command(binary, "get", "-c", dir, "/proj/data.bin", dst).CombinedOutput(); err == nil ||
		!strings.Contains(string(out), "cannot stat '/proj/data.bin': No such file or directory") {
		t.Fatalf("get of removed file: %v %s", err, out)
	}
	// A client with the wrong secret is refused.
	good, _ := os.ReadFile(filepath.Join(dir, "secret"))
	os.WriteFile(filepath.Join(dir, "secret"), []byte(strings.Repeat("ab", 32)+"\n"), 0o600)
	if out, err := exec.Command(binary, "ls", "-c", dir, "/").CombinedOutput(); err == nil ||
		!strings.Contains(string(out), "authentication") {
		t.Fatalf("ls with a wrong secret: %v %s", err, out)
	}
	os.WriteFile(filepath.Join(dir, "secret"), good, 0o600)
	up.stop(t)
}

// TestCrashConsistency kills `poolfs up` with SIGKILL in the middle of
// large puts and overwrites, restarts it, and checks that every file is
// entirely its old or its new content, that every fragment of every
// committed generation exists, and that garbage is collected.
func TestCrashConsistency(t *testing.T) {
	dir := t.TempDir()
	tmp := t.TempDir()
	args := []string{"--drives", "12", "--drive-size", "2G", "--unit", "128K"}
	up := startUp(t, dir, args...)
	const files = 6
	old := make([][]byte, files)
	neu := make([][]byte, files)
	for i := range old {
		old[i] = writeRandom(t, filepath.Join(tmp, fmt.Sprintf("old%d", i)), 3<<20+i*4099)
		neu[i] = writeRandom(t, filepath.Join(tmp, fmt.Sprintf("new%d", i)), (1+8*i)<<20+i*777)
		run(t, "put", "-c", dir, "-q", filepath.Join(tmp, fmt.Sprintf("old%d", i)), fmt.Sprintf("/f%d", i))
	}
	// Overwrite all files and write new ones concurrently; kill the
	// cluster while they run.
	var wg sync.WaitGroup
	for i := 0; i < files; i++ {
		for _, target := range []string{fmt.Sprintf("/f%d", i), fmt.Sprintf("/n%d", i)} {
			wg.Add(1)
			go func(i int, target string) {
				defer wg.Done()
				exec.Command(binary, "put", "-c", dir, "-q", filepath.Join(tmp, fmt.Sprintf("new%d", i)), target).Run()
			}(i, target)
		}
	}
	// One more put reads from a pipe that stalls after 24 MiB, so that it
	// is certainly unfinished when the cluster dies, however fast the
	// others are.
	stall := exec.Command(binary, "put", "-c", dir, "-q", "-", "/stalled")
	pw, err := stall.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := stall.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		chunk := make([]byte, 1<<20)
		for range 24 {
			rand.Read(chunk)
			if _, err := pw.Write(chunk); err != nil {
				return
			}
		}
	}()
	// Kill when at least one put has finished and another has committed
	// some stripes of its unfinished file.
	waitMidWrite(t, dir)
	up.kill()
	wg.Wait()
	pw.Close()
	stall.Wait()

	startUp(t, dir, args...)
	ctx := context.Background()
	conn, err := cluster.Connect(ctx, dir, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var sawOld, sawNew int
	for i := 0; i < files; i++ {
		got := getBytes(t, conn, fmt.Sprintf("/f%d", i))
		switch {
		case bytes.Equal(got, old[i]):
			sawOld++
		case bytes.Equal(got, neu[i]):
			sawNew++
		default:
			t.Errorf("/f%d is neither its old nor its new content (%d bytes)", i, len(got))
		}
		if _, err := conn.Client.Resolve(ctx, fmt.Sprintf("/n%d", i)); err == nil {
			if got := getBytes(t, conn, fmt.Sprintf("/n%d", i)); !bytes.Equal(got, neu[i]) {
				t.Errorf("/n%d exists but is not its full content (%d bytes)", i, len(got))
			}
		}
	}
	t.Logf("after the crash: %d files old, %d new", sawOld, sawNew)

	// Collect garbage, then the fragments on the drives must be exactly
	// those of the committed generations.
	gc := run(t, "gc", "-c", dir, "--orphans", "--grace", "0s")
	t.Log(strings.TrimSpace(gc))
	var q, frags, orphans, scanned, temps int
	if _, err := fmt.Sscanf(gc, "gc: %d queued generations (%d fragments deleted), %d orphan fragments of %d scanned, %d unfinished puts",
		&q, &frags, &orphans, &scanned, &temps); err != nil {
		t.Fatalf("gc output %q: %v", gc, err)
	}
	// The stalled put's temporary file at least (queued generations may
	// have been collected by the background collector already).
	if temps == 0 {
		t.Fatal("the crash left no unfinished write behind: the test did not kill mid-write")
	}
	want := committedFragments(t, conn)
	have := storedFragments(t, dir)
	for k, d := range want {
		if have[k] != d {
			t.Errorf("committed fragment %v missing from %v (found on %v)", k, d, have[k])
		}
	}
	for k, d := range have {
		if _, ok := want[k]; !ok {
			t.Errorf("garbage fragment %v on %v not collected", k, d)
		}
	}
	if len(want) == 0 {
		t.Fatal("no committed fragments at all")
	}
}

func waitMidWrite(t *testing.T, dir string) {
	t.Helper()
	ctx := context.Background()
	conn, err := cluster.Connect(ctx, dir, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		ents, err := conn.Meta.Readdir(ctx, meta.RootIno, "", 1000)
		if err != nil {
			t.Fatal(err)
		}
		done, partial := false, false
		for _, e := range ents {
			if strings.HasPrefix(e.Name, "n") {
				done = true
			}
			if strings.HasPrefix(e.Name, ".poolfs-put.") {
				if a, err := conn.Meta.Getattr(ctx, e.Ino); err == nil && a.Size > 0 {
					partial = true
				}
			}
		}
		if done && partial {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("no put got under way")
}

func getBytes(t *testing.T, conn *cluster.Conn, p string) []byte {
	t.Helper()
	var b bytes.Buffer
	if _, err := conn.Client.Get(context.Background(), p, &b, client.GetOptions{}); err != nil {
		t.Fatalf("get %s: %v", p, err)
	}
	return b.Bytes()
}

// committedFragments walks the namespace and lists every fragment of every
// committed stripe generation with the drive that should hold it.
func committedFragments(t *testing.T, conn *cluster.Conn) map[erasure.FragmentKey]placement.DriveID {
	ctx := context.Background()
	out := map[erasure.FragmentKey]placement.DriveID{}
	var walk func(dir meta.Ino)
	walk = func(dir meta.Ino) {
		ents, err := conn.Meta.Readdir(ctx, dir, "", 100000)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if e.Type == meta.TypeDir {
				walk(e.Ino)
				continue
			}
			recs, err := conn.Meta.Stripes(ctx, e.Ino, 0, 1<<40)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				for i, d := range r.Drives {
					out[erasure.FragmentKey{Ino: uint64(e.Ino), Stripe: r.Stripe, Gen: r.Gen, Index: uint8(i)}] = placement.DriveID(d)
				}
			}
		}
	}
	walk(meta.RootIno)
	return out
}

// storedFragments lists every fragment on every drive through the storage
// server.
func storedFragments(t *testing.T, dir string) map[erasure.FragmentKey]placement.DriveID {
	info, secret, err := cluster.ReadInfo(dir)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rpc.Dial(info.Mgmt, secret, rpc.ClientOptions{Errors: storage.Errors()})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var ids []placement.DriveID
	if err := rc.Call(context.Background(), "storage.Drives", struct{}{}, nil, &ids); err != nil {
		t.Fatal(err)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	out := map[erasure.FragmentKey]placement.DriveID{}
	for _, id := range ids {
		err := storage.NewRemoteDrive(rc, id).ListFragments(context.Background(),
			func(k erasure.FragmentKey, _ int64, _ time.Time) error {
				out[k] = id
				return nil
			})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}
