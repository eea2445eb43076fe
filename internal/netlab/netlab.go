package netlab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// prefix starts the name of every namespace a lab makes.
const prefix = "netlab-"

// Subnet is the network of every lab; host i (from 0) has address
// 198.18.0.(i+1).
const Subnet = "198.18.0.0/15"

var labSeq atomic.Uint64

// Lab is a set of hosts joined by one switch.
type Lab struct {
	t  testing.TB
	id string // netlab-PID-N
	sw string // the switch's namespace
	mu struct {
		sync.Mutex
		hosts []*Host
		cmds  []*exec.Cmd
	}
}

// Host is one network namespace of a lab.
type Host struct {
	Name string // as given to AddHost
	NS   string // namespace name (ip netns)
	IP   string // its address on the lab's switch
	lab  *Lab
	port string // the switch's end of its link
}

// New makes an empty lab whose every trace is removed when t ends. It skips
// t (fails it under CI=true) when the machine cannot make namespaces.
func New(t testing.TB) *Lab {
	t.Helper()
	if err := available(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("netlab: %v", err)
		}
		t.Skipf("netlab: %v", err)
	}
	Sweep()
	l := &Lab{t: t, id: fmt.Sprintf("%s%d-%d", prefix, os.Getpid(), labSeq.Add(1))}
	l.sw = l.id + "-sw"
	t.Cleanup(l.close)
	for _, args := range [][]string{
		{"netns", "add", l.sw},
		{"-n", l.sw, "link", "set", "lo", "up"},
		{"-n", l.sw, "link", "add", "br0", "type", "bridge"},
		{"-n", l.sw, "link", "set", "br0", "up"},
	} {
		if err := ip(args...); err != nil {
			t.Fatalf("netlab: %v", err)
		}
	}
	return l
}

// available says why namespaces cannot be made here, or nil.
func available() error {
	if os.Geteuid() != 0 {
		return errors.New("needs root to make network namespaces")
	}
	for _, tool := range []string{"ip", "nsenter"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("needs %s (iproute2, util-linux): %w", tool, err)
		}
	}
	return nil
}

// AddHost adds a host with a loopback and one address on the switch.
func (l *Lab) AddHost(name string) *Host {
	l.t.Helper()
	l.mu.Lock()
	i := len(l.mu.hosts)
	h := &Host{Name: name, NS: fmt.Sprintf("%s-%d", l.id, i), IP: fmt.Sprintf("198.18.0.%d", i+1),
		lab: l, port: fmt.Sprintf("p%d", i)}
	l.mu.hosts = append(l.mu.hosts, h)
	l.mu.Unlock()
	if i >= 250 {
		l.t.Fatalf("netlab: at most 250 hosts")
	}
	for _, args := range [][]string{
		{"netns", "add", h.NS},
		{"-n", h.NS, "link", "set", "lo", "up"},
		{"-n", l.sw, "link", "add", h.port, "type", "veth", "peer", "name", "eth0", "netns", h.NS},
		{"-n", l.sw, "link", "set", h.port, "master", "br0", "up"},
		{"-n", h.NS, "addr", "add", h.IP + "/15", "dev", "eth0"},
		{"-n", h.NS, "link", "set", "eth0", "up"},
	} {
		if err := ip(args...); err != nil {
			l.t.Fatalf("netlab: host %s: %v", name, err)
		}
	}
	return h
}

// Addr returns the host's address with a port, "198.18.0.N:port".
func (h *Host) Addr(port int) string {
	return net.JoinHostPort(h.IP, strconv.Itoa(port))
}

// Command returns a command that runs in the host's network namespace (and
// in the machine's mount namespace), in a process group of its own. The lab
// kills its group when the test ends if it still runs.
func (h *Host) Command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command("nsenter", append([]string{"--net=" + nsPath(h.NS), "--", name}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	h.lab.mu.Lock()
	h.lab.mu.cmds = append(h.lab.mu.cmds, cmd)
	h.lab.mu.Unlock()
	return cmd
}

// CommandAs is Command run as user uid, group gid (nsenter enters the
// namespace as root, then changes user).
func (h *Host) CommandAs(uid, gid int, name string, args ...string) *exec.Cmd {
	cmd := h.Command(name, args...)
	cmd.Args = append([]string{cmd.Args[0], cmd.Args[1], "--setuid=" + strconv.Itoa(uid), "--setgid=" + strconv.Itoa(gid)}, cmd.Args[2:]...)
	return cmd
}

// Dial connects from the host to addr (an IP address and port: no name is
// resolved inside a host).
func (h *Host) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		var r result
		r.err = inNS(h.NS, func() error {
			var d net.Dialer
			var err error
			r.c, err = d.DialContext(ctx, network, addr)
			return err
		})
		ch <- r
	}()
	r := <-ch
	return r.c, r.err
}

// Listen listens on addr in the host's namespace (e.g. h.Addr(0)).
func (h *Host) Listen(network, addr string) (net.Listener, error) {
	type result struct {
		l   net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		var r result
		r.err = inNS(h.NS, func() error {
			var err error
			r.l, err = net.Listen(network, addr)
			return err
		})
		ch <- r
	}()
	r := <-ch
	return r.l, r.err
}

// inNS runs fn on an OS thread that entered network namespace ns (sockets
// fn makes belong to it), then moves the thread back. A thread that cannot
// move back is never given back to the scheduler: its goroutine exits
// locked, which ends the thread. (Threads must not end otherwise: a child
// started with Pdeathsig from a thread that ends is killed.)
func inNS(ns string, fn func() error) error {
	runtime.LockOSThread()
	self, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("netlab: %w", err)
	}
	defer self.Close()
	f, err := os.Open(nsPath(ns))
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("netlab: %w", err)
	}
	defer f.Close()
	if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("netlab: enter %s: %w", ns, err)
	}
	ferr := fn()
	if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err == nil {
		runtime.UnlockOSThread()
	}
	return ferr
}

// LinkDown cuts the host off the switch (its address stays); LinkUp
// restores it.
func (h *Host) LinkDown() error { return ip("-n", h.lab.sw, "link", "set", h.port, "down") }

// LinkUp restores a link cut by LinkDown.
func (h *Host) LinkUp() error { return ip("-n", h.lab.sw, "link", "set", h.port, "up") }

func nsPath(ns string) string { return filepath.Join("/run/netns", ns) }

// close kills the lab's processes and deletes its namespaces.
func (l *Lab) close() {
	l.mu.Lock()
	cmds, hosts := l.mu.cmds, l.mu.hosts
	l.mu.Unlock()
	for _, c := range cmds {
		// Process.Signal, unlike ProcessState, is safe beside a Wait in
		// another goroutine, and fails once the process was reaped.
		if c.Process != nil && c.Process.Signal(syscall.Signal(0)) == nil {
			_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
			_ = c.Process.Signal(syscall.SIGKILL)
		}
	}
	for _, h := range hosts {
		removeNS(h.NS)
	}
	removeNS(l.sw)
}

// removeNS deletes a namespace. Processes still in it are not looked for
// (that means reading every process's /proc entry, which blocks on a
// process stuck in a page fault on a dead FUSE mount): the lab kills its
// own, and a namespace lives on until its last process ends.
func removeNS(ns string) {
	_ = ip("netns", "del", ns)
}

// Sweep deletes the namespaces of labs whose test binary is gone.
func Sweep() {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		pid, err := strconv.Atoi(strings.SplitN(strings.TrimPrefix(name, prefix), "-", 2)[0])
		if err != nil || pid <= 0 || alive(pid) {
			continue
		}
		removeNS(name)
	}
}

func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// ip runs ip(8).
func ip(args ...string) error {
	var stderr bytes.Buffer
	cmd := exec.Command("ip", args...)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return nil
}
