package netlab

import (
	"context"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// echo serves one line back on every connection of l.
func echo(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			_, _ = io.Copy(c, c)
		}()
	}
}

func roundTrip(t *testing.T, dial func(ctx context.Context, network, addr string) (net.Conn, error), addr string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c, err := dial(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return err
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(c, buf); err != nil {
		return err
	}
	if string(buf) != "ping\n" {
		return fmt.Errorf("not the echo server: it returned %q", buf)
	}
	return nil
}

// reach is roundTrip tried again for up to 5 s: a link just set up (or
// brought back) may drop the first SYN while its carrier comes up, and TCP
// sends the next one only after a second, past roundTrip's timeout.
func reach(t *testing.T, dial func(ctx context.Context, network, addr string) (net.Conn, error), addr string) error {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := roundTrip(t, dial, addr)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestHostsReachEachOtherAndNothingElse(t *testing.T) {
	var names []string
	t.Run("lab", func(t *testing.T) {
		lab := New(t)
		a, b := lab.AddHost("a"), lab.AddHost("b")
		names = append(names, lab.sw, a.NS, b.NS)
		la, err := a.Listen("tcp", a.Addr(7000))
		if err != nil {
			t.Fatal(err)
		}
		defer la.Close()
		go echo(la)
		lo, err := a.Listen("tcp", "127.0.0.1:7001")
		if err != nil {
			t.Fatal(err)
		}
		defer lo.Close()
		go echo(lo)

		if err := reach(t, b.Dial, a.Addr(7000)); err != nil {
			t.Fatalf("b to a: %v", err)
		}
		if err := roundTrip(t, a.Dial, "127.0.0.1:7001"); err != nil {
			t.Fatalf("a to its loopback: %v", err)
		}
		if err := roundTrip(t, b.Dial, "127.0.0.1:7001"); err == nil {
			t.Fatal("b reached a's loopback")
		}
		var d net.Dialer
		if err := roundTrip(t, d.DialContext, a.Addr(7000)); err == nil {
			t.Fatal("the machine's own namespace reached a host's echo server")
		}

		if err := a.LinkDown(); err != nil {
			t.Fatal(err)
		}
		if err := roundTrip(t, b.Dial, a.Addr(7000)); err == nil {
			t.Fatal("b reached a over a link that is down")
		}
		if err := a.LinkUp(); err != nil {
			t.Fatal(err)
		}
		if err := reach(t, b.Dial, a.Addr(7000)); err != nil {
			t.Fatalf("b to a after the link came back: %v", err)
		}

		out, err := b.Command("ip", "-o", "-4", "addr", "show").Output()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(out), b.IP+"/15") || strings.Contains(string(out), a.IP) {
			t.Fatalf("a process of b sees addresses:\n%s", out)
		}
		// A process left running is killed with the lab.
		if err := a.Command("sleep", "600").Start(); err != nil {
			t.Fatal(err)
		}
	})
	list, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if strings.Contains(string(list), n) {
			t.Errorf("namespace %s outlived its test:\n%s", n, list)
		}
	}
}

func TestSweepRemovesNamespacesOfDeadBinaries(t *testing.T) {
	New(t) // skips, or fails under CI, where namespaces cannot be made
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	ns := prefix + itoa(dead.Process.Pid) + "-1-0"
	if err := ip("netns", "add", ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ip("netns", "del", ns) })
	Sweep()
	list, _ := exec.Command("ip", "netns", "list").Output()
	if strings.Contains(string(list), ns) {
		t.Fatalf("Sweep left %s", ns)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
