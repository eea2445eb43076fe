package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"poolfs/internal/client"
	"poolfs/internal/meta/pgtest"
	"poolfs/internal/netlab"
	"poolfs/internal/testlog"
)

// daemon is a poolfs service started on a lab host.
type daemon struct {
	name string
	cmd  *exec.Cmd
	out  *testlog.Buffer
}

// startDaemon runs poolfs args on host h and waits until its output holds
// marker.
func startDaemon(t *testing.T, h *netlab.Host, name, marker string, args ...string) *daemon {
	t.Helper()
	d := &daemon{name: name, cmd: h.Command(binary, args...), out: &testlog.Buffer{}}
	pr, pw := io.Pipe()
	d.cmd.Stdout, d.cmd.Stderr = pw, pw
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	found := make(chan struct{})
	go func() {
		var once sync.Once
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			fmt.Fprintln(d.out, sc.Text())
			if strings.Contains(sc.Text(), marker) {
				once.Do(func() { close(found) })
			}
		}
	}()
	exited := make(chan error, 1)
	go func() { exited <- d.cmd.Wait(); pw.Close() }()
	t.Cleanup(func() {
		_ = d.cmd.Process.Signal(syscall.SIGKILL)
		if t.Failed() {
			t.Logf("%s output:\n%s", name, d.out.String())
		}
	})
	select {
	case <-found:
	case err := <-exited:
		t.Fatalf("%s exited: %v\n%s", name, err, d.out.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not print %q in 30 s:\n%s", name, marker, d.out.String())
	}
	return d
}

// run runs poolfs args on host h and returns its output.
func runOn(t *testing.T, h *netlab.Host, args ...string) string {
	t.Helper()
	out, err := h.Command(binary, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("poolfs %s on %s: %v\n%s", strings.Join(args, " "), h.Name, err, out)
	}
	return string(out)
}

// startLabPostgres runs a PostgreSQL server on host h and returns the URL
// of its database, once it answers from host from.
func startLabPostgres(t *testing.T, h, from *netlab.Host) string {
	t.Helper()
	bin, data, sock, attr := pgtest.Initdb(t, netlab.Subnet)
	uid, gid := 0, 0
	if attr.Credential != nil {
		uid, gid = int(attr.Credential.Uid), int(attr.Credential.Gid)
	}
	cmd := h.CommandAs(uid, gid, bin, "-D", data, "-p", "5432", "-c", "listen_addresses="+h.IP,
		"-c", "unix_socket_directories="+sock, "-c", "max_connections=200", "-c", "shared_buffers=64MB")
	log := &testlog.Buffer{}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
		}
	})
	url := "postgres://postgres@" + h.Addr(5432) + "/postgres?sslmode=disable"
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DialFunc = from.Dial
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		c, err := pgx.ConnectConfig(ctx, cfg)
		cancel()
		if err == nil {
			c.Close(context.Background())
			return url
		}
		select {
		case werr := <-exited:
			t.Fatalf("PostgreSQL on %s exited: %v\n%s", h.IP, werr, log.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("PostgreSQL on %s: %v\n%s", h.IP, err, log.String())
		}
	}
}

// labFile is a file of random bytes written through one mount.
type labFile struct {
	name string
	data []byte
}

func newLabFile(name string, size int, seed uint64) labFile {
	b := make([]byte, size)
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	for i := 0; i+8 <= len(b); i += 8 {
		v := r.Uint64()
		for j := range 8 {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return labFile{name: name, data: b}
}

// checkFile reads f through mount dir and compares it byte for byte.
func checkFile(dir string, f labFile) error {
	got, err := os.ReadFile(filepath.Join(dir, f.name))
	if err != nil {
		return err
	}
	if !bytes.Equal(got, f.data) {
		i := 0
		for i < len(got) && i < len(f.data) && got[i] == f.data[i] {
			i++
		}
		return fmt.Errorf("%s through %s: %d bytes, want %d; first difference at byte %d", f.name, dir, len(got), len(f.data), i)
	}
	return nil
}

// TestSeveralHosts runs a cluster over network namespaces, one service per
// host: PostgreSQL, mgmt, meta, four storage servers of three drives each,
// and two clients that mount. Files written through either mount read back
// byte for byte through the other; a storage server killed (SIGKILL) while
// both clients write and read costs no client error and no byte; so do a
// server restarted within the grace, a server stopped with SIGSTOP and
// resumed, a server whose link is cut and restored, and the metadata
// server killed and started again.
func TestSeveralHosts(t *testing.T) {
	c := startLabCluster(t, 4)
	srv, storage, mounts, md := c.srv, c.storage, c.mounts, c.md
	c2 := c.clients[1]
	dir, storageArgs, metaArgs, metaSrv := c.dir, c.storageArgs, c.metaArgs, c.metaSrv

	// Each client writes files the other reads.
	var files [2][]labFile
	for i := range 2 {
		for j := range 3 {
			f := newLabFile(fmt.Sprintf("c%d-%d", i+1, j), 3<<20+j*12345, uint64(10*i+j))
			if err := os.WriteFile(filepath.Join(mounts[i], f.name), f.data, 0o644); err != nil {
				t.Fatalf("write through mount %d: %v", i+1, err)
			}
			files[i] = append(files[i], f)
		}
	}
	for i := range 2 {
		for _, f := range files[1-i] {
			if err := checkFile(mounts[i], f); err != nil {
				t.Fatal(err)
			}
		}
	}

	// Load from both clients; s3 is killed once it is under way.
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		errs    []error
		written [2][]labFile
	)
	started := make(chan struct{}, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 6 {
				f := newLabFile(fmt.Sprintf("load-c%d-%d", i+1, j), 2<<20+j*4096+i, uint64(100+10*i+j))
				err := os.WriteFile(filepath.Join(mounts[i], f.name), f.data, 0o644)
				if err == nil {
					err = checkFile(mounts[i], files[1-i][j%3])
				}
				mu.Lock()
				if err != nil {
					errs = append(errs, fmt.Errorf("client %d: %w", i+1, err))
				} else {
					written[i] = append(written[i], f)
				}
				mu.Unlock()
				if j == 0 {
					started <- struct{}{}
				}
			}
		}()
	}
	<-started
	<-started
	if err := storage[2].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for _, err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}

	// Everything reads back from both clients, degraded: s3's drives are down.
	for i := range 2 {
		for _, f := range append(append(append([]labFile(nil), files[0]...), files[1]...), append(written[0], written[1]...)...) {
			if err := checkFile(mounts[i], f); err != nil {
				t.Error(err)
			}
		}
	}
	st := runOn(t, c2, "-c", dir("c2"), "status")
	down := 0
	for _, line := range strings.Split(st, "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[1] == "s3" && f[2] == "down" {
			down++
		}
	}
	if down != 3 {
		t.Errorf("status shows %d of s3's 3 drives down:\n%s", down, st)
	}
	// The servers table: s3 with its address, enclosure label and 3 drives down.
	if !regexp.MustCompile(`(?m)^s3\s+` + regexp.QuoteMeta(srv[2].Addr(9500)) + `\s+-\s+e1\s+3\s+0\s+3\s+0\s+0\s*$`).MatchString(st) {
		t.Errorf("status does not show server s3 down:\n%s", st)
	}
	if t.Failed() {
		t.FailNow()
	}

	// s3 comes back within the grace: its drives are up again.
	storage[2] = startDaemon(t, srv[2], "s3 again", "poolfs storage s3: serving", storageArgs(2)...)
	waitServers(t, c2, dir("c2"), 20*time.Second, "all drives up", func(rows map[string][]string) bool {
		for _, r := range rows {
			if r[1] != r[0] {
				return false
			}
		}
		return true
	})
	waitHealthy(t, c2, dir("c2")) // the stripes written while s3 was away are back on it

	// s4 hangs (SIGSTOP: its kernel still accepts connections, nothing
	// answers): it is marked down with all its drives, reads degrade, new
	// files are placed on the other servers, no client error.
	if err := storage[3].cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	t.Cleanup(func() { _ = storage[3].cmd.Process.Signal(syscall.SIGCONT) })
	waitServers(t, c2, dir("c2"), hangDetection, "s4 down", func(rows map[string][]string) bool {
		return rows["s4"] != nil && rows["s4"][2] == "3"
	})
	t.Logf("hung server marked down after %v", time.Since(stopped).Round(100*time.Millisecond))
	// As a server, its drives all at once (a probe that timed out while the
	// server does not answer, or a handshake that timed out), not as three
	// slow drives one by one.
	if ev := runOn(t, c2, "-c", dir("c2"), "events"); len(regexp.MustCompile(`drive\.down\s+d\d+\s+server s4 (hangs|does not answer)`).FindAllString(ev, -1)) != 3 {
		t.Errorf("events do not take s4's 3 drives down as its server's:\n%s", ev)
	}
	all := append(append(append([]labFile(nil), files[0]...), files[1]...), append(written[0], written[1]...)...)
	for i := range 2 {
		for _, f := range all {
			if err := checkFile(mounts[i], f); err != nil {
				t.Errorf("while s4 hangs: %v", err)
			}
		}
	}
	time.Sleep(client.DefaultMapMaxAge) // the clients' maps say s4 is down
	var during []labFile
	for i := range 2 {
		f := newLabFile(fmt.Sprintf("hung-c%d", i+1), 3<<20+i, uint64(200+i))
		if err := os.WriteFile(filepath.Join(mounts[i], f.name), f.data, 0o644); err != nil {
			t.Fatalf("write through mount %d while s4 hangs: %v", i+1, err)
		}
		during = append(during, f)
	}
	if err := storage[3].cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	waitServers(t, c2, dir("c2"), 20*time.Second, "all drives up after SIGCONT", func(rows map[string][]string) bool {
		for _, r := range rows {
			if r[1] != r[0] {
				return false
			}
		}
		return true
	})
	waitHealthy(t, c2, dir("c2"))
	for i := range 2 {
		for _, f := range append(all, during...) {
			if err := checkFile(mounts[i], f); err != nil {
				t.Errorf("after s4 came back: %v", err)
			}
		}
	}

	// s1's link is cut (ip link set down: packets vanish, nothing is
	// refused) and restored within the grace.
	if err := srv[0].LinkDown(); err != nil {
		t.Fatal(err)
	}
	waitServers(t, c2, dir("c2"), hangDetection, "s1 down", func(rows map[string][]string) bool {
		return rows["s1"] != nil && rows["s1"][2] == "3"
	})
	for _, f := range append(all, during...) {
		if err := checkFile(mounts[0], f); err != nil {
			t.Errorf("while s1 is cut off: %v", err)
		}
	}
	if err := srv[0].LinkUp(); err != nil {
		t.Fatal(err)
	}
	waitServers(t, c2, dir("c2"), 20*time.Second, "all drives up after the link came back", func(rows map[string][]string) bool {
		for _, r := range rows {
			if r[1] != r[0] {
				return false
			}
		}
		return true
	})
	for _, f := range append(all, during...) {
		if err := checkFile(mounts[1], f); err != nil {
			t.Errorf("after s1's link came back: %v", err)
		}
	}

	// The metadata server is killed and started again: the mounts carry
	// on without being mounted again.
	if err := metaSrv.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	startDaemon(t, md, "meta again", "poolfs meta: serving", metaArgs...)
	after := newLabFile("after-meta-restart", 5<<20, 300)
	if err := os.WriteFile(filepath.Join(mounts[0], after.name), after.data, 0o644); err != nil {
		t.Fatalf("write after the metadata server restarted: %v", err)
	}
	for i := range 2 {
		for _, f := range []labFile{after, during[0], files[1][0]} {
			if err := checkFile(mounts[i], f); err != nil {
				t.Errorf("after the metadata server restarted: %v", err)
			}
		}
	}
}

// hangDetection is the most a hung storage server may take to be marked
// down: a health pass (1 s), a probe that times out (2 s), the server's
// ping that times out (1 s), with room for a loaded machine.
const hangDetection = 15 * time.Second

// waitHealthy waits until status says the pool is healthy: a resync
// has put back what a server missed while it was away. Only then is the
// next server taken away: two servers' worth of fragments missing at once
// is more than a 4+2 stripe survives.
func waitHealthy(t *testing.T, h *netlab.Host, dir string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := h.Command(binary, "-c", dir, "status").CombinedOutput()
		if err == nil && strings.Contains(string(st), "health: HEALTHY") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not healthy within 30 s:\n%s", st)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// waitServers polls `poolfs status` on host h until ok holds for its
// servers table (rows by server: drives, up, down, failed, other).
func waitServers(t *testing.T, h *netlab.Host, dir string, within time.Duration, what string, ok func(map[string][]string) bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	row := regexp.MustCompile(`(?m)^(s\d+)\s+\S+\s+\S+\s+\S+\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s*$`)
	var st []byte
	for {
		var err error
		st, err = h.Command(binary, "-c", dir, "status").CombinedOutput()
		if err == nil {
			rows := map[string][]string{}
			for _, m := range row.FindAllStringSubmatch(string(st), -1) {
				rows[m[1]] = m[2:]
			}
			if len(rows) > 0 && ok(rows) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("not %s within %v:\n%s", what, within, st)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
