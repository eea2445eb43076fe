package netlab

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strings"
	"testing"
)

// TestLimitRate puts a token bucket of the given rate on both ends of a
// host's link, and a second call replaces it. The switch's end queues at
// least PortQueue bytes, as a switch port does, whatever the rate.
func TestLimitRate(t *testing.T) {
	lab := New(t)
	h := lab.AddHost("a")
	if err := h.LimitRate(0); err == nil {
		t.Fatal("a rate of 0 was accepted")
	}
	for _, rate := range []int64{32e6, 100e6} {
		if err := h.LimitRate(rate); err != nil {
			t.Fatal(err)
		}
		want := map[int64]string{32e6: "rate 32Mbit", 100e6: "rate 100Mbit"}[rate]
		for _, end := range [][2]string{{h.NS, "eth0"}, {lab.sw, h.port}} {
			out, err := exec.Command("tc", "-n", end[0], "qdisc", "show", "dev", end[1]).CombinedOutput()
			if err != nil {
				t.Fatalf("tc: %v: %s", err, out)
			}
			if q := strings.TrimSpace(string(out)); strings.Count(q, "\n") != 0 || !strings.HasPrefix(q, "qdisc tbf") || !strings.Contains(q, want) {
				t.Errorf("%s of %s: %q, want one tbf qdisc with %s", end[1], end[0], q, want)
			}
		}
		if q := portQueue(t, lab.sw, h.port); q < PortQueue*99/100 {
			t.Errorf("at %d bit/s the switch port queues %d bytes, want %d", rate, q, PortQueue)
		}
	}
}

// portQueue is the bytes the tbf qdisc of dev in namespace ns queues
// before it drops: tc shows them as the time its rate takes to send them
// beyond the bucket.
func portQueue(t *testing.T, ns, dev string) int64 {
	t.Helper()
	out, err := exec.Command("tc", "-j", "-n", ns, "qdisc", "show", "dev", dev).Output()
	if err != nil {
		t.Fatalf("tc: %v", err)
	}
	var qs []struct {
		Kind    string
		Options struct {
			Rate  int64 // bytes/s
			Burst int64 // bytes
			Lat   int64 // µs
		}
	}
	if err := json.Unmarshal(out, &qs); err != nil || len(qs) != 1 || qs[0].Kind != "tbf" {
		t.Fatalf("tc -j on %s: %v: %s", dev, err, out)
	}
	o := qs[0].Options
	return o.Rate*o.Lat/1e6 + o.Burst
}

// TestLimitRatePortHoldsManyWindows sends the first windows of many TCP
// connections at once into a host of a rate-limited link, as clients
// writing to one storage server do: the switch port queues them all
// (PortQueue), drops nothing, and every byte arrives.
func TestLimitRatePortHoldsManyWindows(t *testing.T) {
	lab := New(t)
	srv, cli := lab.AddHost("srv"), lab.AddHost("cli")
	if err := srv.LimitRate(32e6); err != nil {
		t.Fatal(err)
	}
	if err := cli.LimitRate(256e6); err != nil {
		t.Fatal(err)
	}
	l, err := srv.Listen("tcp", srv.Addr(7000))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	const conns, each = 32, 24 << 10 // 768 KiB: 3 times the 50 ms a queue sized in time holds
	got := make(chan error, conns)
	go func() {
		for range conns {
			c, err := l.Accept()
			if err != nil {
				got <- err
				return
			}
			go func() {
				defer c.Close()
				b, err := io.ReadAll(c)
				if err == nil && !bytes.Equal(b, pattern(each, b[:min(len(b), 1)])) {
					err = fmt.Errorf("received %d bytes, not the %d sent", len(b), each)
				}
				got <- err
			}()
		}
	}()
	var cs []net.Conn
	for range conns {
		c, err := cli.Dial(context.Background(), "tcp", srv.Addr(7000))
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	start := make(chan struct{})
	for i, c := range cs {
		go func() {
			<-start
			if _, err := c.Write(pattern(each, []byte{byte(i)})); err != nil {
				t.Error(err)
			}
			c.Close()
		}()
	}
	close(start)
	for range conns {
		if err := <-got; err != nil {
			t.Fatal(err)
		}
	}
	if d := portDrops(t, lab.sw, srv.port); d != 0 {
		t.Errorf("the switch port dropped %d packets of %d connections' first %d KiB", d, conns, each>>10)
	}
}

// pattern is n bytes counting up from first[0] (0 if first is empty).
func pattern(n int, first []byte) []byte {
	b := make([]byte, n)
	var v byte
	if len(first) > 0 {
		v = first[0]
	}
	for i := range b {
		b[i] = v + byte(i)
	}
	return b
}

// portDrops is the packets the qdisc of dev in namespace ns dropped.
func portDrops(t *testing.T, ns, dev string) int64 {
	t.Helper()
	out, err := exec.Command("tc", "-s", "-j", "-n", ns, "qdisc", "show", "dev", dev).Output()
	if err != nil {
		t.Fatalf("tc: %v", err)
	}
	var qs []struct{ Drops int64 }
	if err := json.Unmarshal(out, &qs); err != nil || len(qs) != 1 {
		t.Fatalf("tc -s -j on %s: %v: %s", dev, err, out)
	}
	return qs[0].Drops
}
