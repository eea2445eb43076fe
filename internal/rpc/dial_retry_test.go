package rpc

import (
	"context"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// dropProxy listens on 127.0.0.1 and forwards connections to addr, but
// closes a connection as soon as it accepts it while its drop count is
// above zero (counting down), as a server shedding connections in their
// handshake does. It returns its address, the drop count and the count
// of connections it accepted.
func dropProxy(t *testing.T, addr string) (string, *atomic.Int32, *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var drop, accepted atomic.Int32
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			if drop.Add(-1) >= 0 {
				nc.Close()
				continue
			}
			drop.Store(0)
			up, err := net.Dial("tcp", addr)
			if err != nil {
				nc.Close()
				continue
			}
			go func() { io.Copy(up, nc); up.Close() }()
			go func() { io.Copy(nc, up); nc.Close() }()
		}
	}()
	return ln.Addr().String(), &drop, &accepted
}

// TestDialRetriesConnectionDroppedInHandshake: a connection the server
// closes during the handshake is opened again (no request went out), up
// to dialAttempts connections, at Dial and when a call dials; a refused
// handshake (wrong secret) is not.
func TestDialRetriesConnectionDroppedInHandshake(t *testing.T) {
	_, addr := startServer(t, ServerOptions{}, registerEcho)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name         string
		drop         int32
		secret       []byte
		ok           bool
		wantAccepted int32 // by Dial and the call
	}{
		{"one dropped", 1, testSecret, true, 4},
		{"two dropped", 2, testSecret, true, 6},
		{"all dropped", 100, testSecret, false, dialAttempts},
		{"wrong secret", 0, []byte("another secret, not the cluster's"), false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			paddr, drop, accepted := dropProxy(t, addr)
			drop.Store(tc.drop)
			var res echoResult
			c, err := Dial(paddr, tc.secret, ClientOptions{})
			if err == nil {
				defer c.Close()
				// The call must dial: close the connection Dial left idle.
				c.mu.Lock()
				for _, cc := range c.mu.idle {
					cc.nc.Close()
				}
				c.mu.idle = nil
				c.mu.Unlock()
				drop.Store(tc.drop)
				err = c.Call(ctx, "test.Echo", echoArgs{Name: "x", N: 1}, nil, &res)
			}
			switch {
			case tc.ok && (err != nil || res.Greeting != "hello x" || res.N != 2):
				t.Fatalf("call: %+v, %v", res, err)
			case !tc.ok && err == nil:
				t.Fatal("call succeeded")
			case !tc.ok && tc.drop > 0 && !errors.Is(err, ErrUnavailable):
				t.Fatalf("call: %v, want ErrUnavailable", err)
			}
			if n := accepted.Load(); n != tc.wantAccepted {
				t.Fatalf("%d connections, want %d (err %v)", n, tc.wantAccepted, err)
			}
		})
	}
}
