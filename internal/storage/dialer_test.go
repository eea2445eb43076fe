package storage

import (
	"bytes"
	"net"
	"testing"
	"time"

	"poolfs/internal/chunkstore"
	"poolfs/internal/clustermap"
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
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := hung.Accept()
			if err != nil {
				return
			}
			accepted <- c // never answered
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
	select {
	case <-accepted:
		t.Error("the hung server was dialled twice for two callers at once")
	default:
	}
}
