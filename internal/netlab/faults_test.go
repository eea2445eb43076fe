package netlab

import (
	"context"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// udpCount sends n datagrams from host from to a listener on host to and
// returns how many arrived.
func udpCount(t *testing.T, from, to *Host, port, n int) int {
	t.Helper()
	var pc net.PacketConn
	if err := inNS(to.NS, func() error {
		var err error
		pc, err = net.ListenPacket("udp", to.Addr(port))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	counted := make(chan int)
	go func() { // read while sending: the socket buffer holds fewer than n
		got := 0
		buf := make([]byte, 16)
		for {
			_ = pc.SetReadDeadline(time.Now().Add(250 * time.Millisecond))
			if _, _, err := pc.ReadFrom(buf); err != nil {
				counted <- got
				return
			}
			got++
		}
	}()
	c, err := from.Dial(context.Background(), "udp", to.Addr(port))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for range n {
		_, _ = c.Write([]byte("x")) // a packet dropped on output fails its write (EPERM)
		time.Sleep(100 * time.Microsecond)
	}
	return <-counted
}

func TestLossBlockAndRateLimit(t *testing.T) {
	lab := New(t)
	NeedTools(t, "nft", "tc")
	a, b := lab.AddHost("a"), lab.AddHost("b")
	const n = 200
	if got := udpCount(t, a, b, 7100, n); got != n {
		t.Fatalf("without faults %d of %d datagrams arrived", got, n)
	}

	// A one-way partition: a's packets to b vanish, b's reach a.
	if err := a.Block(b); err != nil {
		t.Fatal(err)
	}
	if got := udpCount(t, a, b, 7101, n); got != 0 {
		t.Errorf("a blocked towards b: %d of %d datagrams arrived", got, n)
	}
	if got := udpCount(t, b, a, 7102, n); got != n {
		t.Errorf("b towards a while a blocks b: %d of %d datagrams arrived", got, n)
	}

	// 30% loss on each of a's directions: about 30% of what a sends is
	// lost (the bounds are 6 standard deviations away), and as much of
	// what it receives. Loss replaces the partition.
	if err := a.Loss(30); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []struct {
		from, to *Host
		port     int
	}{{a, b, 7103}, {b, a, 7104}} {
		got := udpCount(t, dir.from, dir.to, dir.port, n)
		if got < 100 || got > 180 {
			t.Errorf("%s to %s with 30%% loss: %d of %d datagrams arrived", dir.from.Name, dir.to.Name, got, n)
		}
	}
	if err := a.Loss(0); err != nil {
		t.Fatal(err)
	}
	if got := udpCount(t, a, b, 7105, n); got != n {
		t.Errorf("after the loss was removed %d of %d datagrams arrived", got, n)
	}
	if err := a.Loss(101); err == nil {
		t.Error("a loss of 101% was accepted")
	}

	// A rate limit is a tbf qdisc on the host's interface; traffic still
	// flows through it, and it goes again.
	if err := a.RateLimit("20mbit"); err != nil {
		t.Fatal(err)
	}
	out, err := a.Command("tc", "qdisc", "show", "dev", "eth0").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "tbf") || !strings.Contains(string(out), "rate 20Mbit") {
		t.Fatalf("tc qdisc after RateLimit: %v\n%s", err, out)
	}
	if got := udpCount(t, a, b, 7106, n); got != n {
		t.Errorf("through the rate limit %d of %d datagrams arrived", got, n)
	}
	if err := a.ClearRateLimit(); err != nil {
		t.Fatal(err)
	}
	if err := a.ClearRateLimit(); err != nil {
		t.Fatalf("a second ClearRateLimit: %v", err)
	}
	out, _ = exec.Command("nsenter", "--net="+nsPath(a.NS), "--", "tc", "qdisc", "show", "dev", "eth0").CombinedOutput()
	if strings.Contains(string(out), "tbf") {
		t.Fatalf("tbf left after ClearRateLimit:\n%s", out)
	}
	if err := a.RateLimit("fast please"); err == nil {
		t.Error("a rate of \"fast please\" was accepted")
	}
}
