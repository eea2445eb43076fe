package storage

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"poolfs/internal/chunkstore"
	"poolfs/internal/clustermap"
	"poolfs/internal/erasure"
	"poolfs/internal/placement"
	"poolfs/internal/rpc"
)

// TestDialerHungServerHoldsUpOnlyItself: while the dial of a server that
// accepts connections and never answers is in flight (up to the
// handshake timeout), drives of another server still resolve at once, and
// a second caller of the hung server waits for the same dial and then
// fails fast instead of dialling again.
func TestDialerHungServerHoldsUpOnlyItself(t *testing.T) {
	secret := bytes.Repeat([]byte("s"), 32)
	r := rpc.NewServer(secret, rpc.ServerOptions{Errors: Errors()})
	NewServer(map[placement.DriveID]chunkstore.Drive{0: chunkstore.NewMemDrive("d0", 1<<20)}, nil).Register(r)
	good, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go r.Serve(good)
	t.Cleanup(func() { r.Close() })
	hung, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// The first connection is never answered; later ones are closed at
	// once (the first caller's dial, failed, tries again: rpc.Client).
	accepted := make(chan net.Conn, 1)
	var first atomic.Bool
	var later atomic.Int32
	go func() {
		for {
			c, err := hung.Accept()
			if err != nil {
				return
			}
			if first.CompareAndSwap(false, true) {
				accepted <- c
			} else {
				later.Add(1)
				c.Close()
			}
		}
	}()
	t.Cleanup(func() { hung.Close() })

	m := &clustermap.Map{
		Servers: []clustermap.Server{{ID: "good", Addr: good.Addr().String()}, {ID: "hung", Addr: hung.Addr().String()}},
		Drives:  []clustermap.Drive{{ID: 0, Server: "good", Capacity: 1 << 20}, {ID: 1, Server: "hung", Capacity: 1 << 20}},
	}
	d := NewDialer(secret, rpc.ClientOptions{})
	t.Cleanup(func() { d.Close() })
	hungErr := make(chan error, 2)
	go func() { _, err := d.Drive(m, 1); hungErr <- err }()
	var conn net.Conn
	select {
	case conn = <-accepted:
	case <-time.After(10 * time.Second):
		t.Fatal("the hung server was never dialled")
	}
	good0 := make(chan error, 1)
	go func() { _, err := d.Drive(m, 0); good0 <- err }()
	select {
	case err := <-good0:
		if err != nil {
			t.Fatalf("drive of the good server: %v", err)
		}
	case err := <-hungErr:
		t.Fatalf("the good server's drive waited for the hung server's dial to end (%v)", err)
	}
	go func() { _, err := d.Drive(m, 1); hungErr <- err }()
	time.Sleep(50 * time.Millisecond) // the second caller waits for the first's dial
	conn.Close()                      // which then fails
	for range 2 {
		if err := <-hungErr; err == nil {
			t.Fatal("a drive of the hung server resolved")
		}
	}
	// One dial, of dialAttempts connections, for both callers.
	if n := later.Load(); n != 2 {
		t.Errorf("the hung server was dialled %d more times after the first dial's connection closed, want 2 (the first dial's retries)", n)
	}
}

// TestClientDialerBoundsCallsPerServer writes many fragments at once
// through a client's dialer to one server of 1 or 4 drives whose writes
// hang until released: at most drives × ClientCallsPerDrive reach the
// server at a time, the others wait, and all complete once the server
// answers.
func TestClientDialerBoundsCallsPerServer(t *testing.T) {
	for _, drives := range []int{1, 4} {
		t.Run(fmt.Sprintf("drives=%d", drives), func(t *testing.T) { testClientDialerBound(t, drives) })
	}
}

func testClientDialerBound(t *testing.T, drives int) {
	secret := bytes.Repeat([]byte("s"), 32)
	var mu sync.Mutex
	cur, most := 0, 0
	arrived := make(chan struct{}, 64)
	release := make(chan struct{})
	srv := rpc.NewServer(secret, rpc.ServerOptions{Errors: Errors()})
	srv.Handle("storage.Write", func(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
		mu.Lock()
		cur++
		most = max(most, cur)
		mu.Unlock()
		arrived <- struct{}{}
		<-release
		mu.Lock()
		cur--
		mu.Unlock()
		return &rpc.Response{}, nil
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	m := &clustermap.Map{Servers: []clustermap.Server{{ID: "s", Addr: ln.Addr().String()}}}
	for id := range placement.DriveID(drives) {
		m.Drives = append(m.Drives, clustermap.Drive{ID: id, Server: "s", Capacity: 1 << 20})
	}
	d := NewClientDialer(secret, rpc.ClientOptions{})
	t.Cleanup(func() { d.Close() })
	drive, err := d.Drive(m, 0)
	if err != nil {
		t.Fatal(err)
	}
	bound := drives * ClientCallsPerDrive
	writes := 3 * bound
	errs := make(chan error, writes)
	for i := range writes {
		go func() {
			key := erasure.FragmentKey{Ino: 1, Stripe: uint64(i), Gen: 1}
			errs <- drive.WriteFragment(context.Background(), key, make([]byte, 4096))
		}()
	}
	for range bound {
		<-arrived
	}
	// A write past the bound would arrive now, if the dialer let it.
	select {
	case <-arrived:
		t.Errorf("more than %d writes reached the server at once", bound)
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	for range writes {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if most > bound {
		t.Errorf("%d writes in flight at once, want at most %d", most, bound)
	}
}
