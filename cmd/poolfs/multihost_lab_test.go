package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"poolfs/internal/netlab"
)

// labCluster is a poolfs cluster over network namespaces, one service per
// host: PostgreSQL, mgmt, meta, storage servers of three drives each (two
// servers an enclosure) and two clients that mount, with a 4+2 pool of
// 256 KiB units over all the drives.
type labCluster struct {
	lab         *netlab.Lab
	pg, mg, md  *netlab.Host
	srv         []*netlab.Host
	clients     []*netlab.Host
	root, token string // token: the file of the server token
	db          string
	storage     []*daemon
	mounts      []string
	mountd      []*daemon // the mount processes, by client
	metaArgs    []string
	metaSrv     *daemon
}

// dir is the configuration directory of host name.
func (c *labCluster) dir(name string) string { return filepath.Join(c.root, name) }

// storageArgs are the arguments of storage server i.
func (c *labCluster) storageArgs(i int) []string {
	h := c.srv[i]
	args := []string{"-c", c.dir(h.Name), "storage", "--join-file", c.token, "--server", h.Name, "--listen", h.Addr(9500),
		"--drive-size", "256M", "--enclosure", fmt.Sprintf("e%d", i/2)}
	for d := range 3 {
		args = append(args, "--drive", filepath.Join(c.dir(h.Name), fmt.Sprintf("d%d", d)))
	}
	return args
}

// startStorage starts storage server i (again) and waits until it serves.
func (c *labCluster) startStorage(t *testing.T, i int) {
	t.Helper()
	h := c.srv[i]
	c.storage[i] = startDaemon(t, h, h.Name, "poolfs storage "+h.Name+": serving", c.storageArgs(i)...)
}

// poolfs runs poolfs args on the second client.
func (c *labCluster) poolfs(t *testing.T, args ...string) string {
	t.Helper()
	return runOn(t, c.clients[1], append([]string{"-c", c.dir(c.clients[1].Name)}, args...)...)
}

// startLabCluster builds the lab and starts a cluster of n storage servers.
func startLabCluster(t *testing.T, n int) *labCluster {
	t.Helper()
	c := &labCluster{lab: netlab.New(t), root: t.TempDir()}
	c.pg, c.mg, c.md = c.lab.AddHost("pg"), c.lab.AddHost("mgmt"), c.lab.AddHost("meta")
	for i := range n {
		c.srv = append(c.srv, c.lab.AddHost(fmt.Sprintf("s%d", i+1)))
	}
	c.clients = []*netlab.Host{c.lab.AddHost("c1"), c.lab.AddHost("c2")}

	c.db = startLabPostgres(t, c.pg, c.mg)
	c.token = createLabCluster(t, c.mg, c.dir("mgmt"), c.mg.Addr(9401))
	startDaemon(t, c.mg, "mgmt", "poolfs mgmt: serving", "-c", c.dir("mgmt"), "mgmt", "--db", c.db, "--listen", c.mg.Addr(9401))
	c.metaArgs = []string{"-c", c.dir("meta"), "meta", "--join-file", c.token, "--db", c.db, "--listen", c.md.Addr(9402)}
	c.metaSrv = startDaemon(t, c.md, "meta", "poolfs meta: serving", c.metaArgs...)
	c.storage = make([]*daemon, n)
	for i := range c.srv {
		c.startStorage(t, i)
	}
	for _, d := range []*daemon{c.metaSrv, c.storage[0]} {
		checkCmdlineHidesToken(t, d, c.token)
	}
	for _, h := range c.clients {
		runOn(t, h, "-c", c.dir(h.Name), "cluster", "join", "--token-file", c.token)
	}
	out := c.poolfs(t, "cluster", "pool", "default", "--scheme", "4+2", "--unit", "256K")
	if want := fmt.Sprintf("over %d drives of %d servers", 3*n, n); !strings.Contains(out, want) {
		t.Fatalf("pool create: %s", out)
	}
	for i, h := range c.clients {
		mnt := filepath.Join(c.root, fmt.Sprintf("mnt%d", i+1))
		if err := os.Mkdir(mnt, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = exec.Command("fusermount3", "-u", "-z", mnt).Run() })
		c.mountd = append(c.mountd, startDaemon(t, h, "mount "+h.Name, "poolfs mounted on", "-c", c.dir(h.Name), "mount", mnt))
		c.mounts = append(c.mounts, mnt)
	}
	return c
}

// createLabCluster runs `poolfs cluster create --mgmt ADDRS` on host h in
// directory dir and returns a file of mode 0600 holding the join token it
// prints last (the server token).
func createLabCluster(t *testing.T, h *netlab.Host, dir, addrs string) string {
	t.Helper()
	out := runOn(t, h, "-c", dir, "cluster", "create", "--mgmt", addrs)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	file := filepath.Join(t.TempDir(), "server.token")
	if err := os.WriteFile(file, []byte(lines[len(lines)-1]+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// checkCmdlineHidesToken fails t unless the command line of daemon d, which
// every local user reads, names the token file by --join-file and holds
// no part of the token in it.
func checkCmdlineHidesToken(t *testing.T, d *daemon, tokenFile string) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", d.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	cmdline := strings.ReplaceAll(string(b), "\x00", " ")
	if !strings.Contains(cmdline, "--join-file "+tokenFile) {
		t.Fatalf("%s: command line %q does not name the token file", d.name, cmdline)
	}
	if leak := tokenLeak(t, cmdline, strings.TrimSpace(string(tok))); leak != "" {
		t.Errorf("%s: command line %q holds %q of the join token", d.name, cmdline, leak)
	}
}
