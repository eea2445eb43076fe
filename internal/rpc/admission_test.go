package rpc

import (
	"errors"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// memInUse returns the live heap after a collection, plus goroutine stacks.
func memInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc + m.StackInuse
}

// waitFor polls cond for up to 30 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for start := time.Now(); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Since(start) > 30*time.Second {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// Thousands of connections that send a few bytes and stall cost the server
// at most MaxPending goroutines and a few KiB each, and do not stop
// authenticated clients, old or new.
func TestUnauthenticatedFlood(t *testing.T) {
	const (
		maxPending = 64
		flood      = 3000
		hello      = "0123456789" // ten bytes of a hello, then nothing
	)
	s, addr := startServer(t, ServerOptions{MaxPending: maxPending, HandshakeTimeout: time.Minute}, registerEcho)
	c := dialTest(t, addr, ClientOptions{})
	if err := c.Call(t.Context(), "test.Echo", echoArgs{}, nil, nil); err != nil {
		t.Fatal(err)
	}
	memBefore, goBefore := memInUse(), runtime.NumGoroutine()

	// Watch the pending count while the flood runs.
	var maxSeen atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			if p := int64(s.Stats().Pending); p > maxSeen.Load() {
				maxSeen.Store(p)
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	})
	conns := make([]net.Conn, 0, flood)
	t.Cleanup(func() {
		for _, nc := range conns {
			nc.Close()
		}
	})
	for range flood {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("after %d connections: %v", len(conns), err)
		}
		conns = append(conns, nc)
		nc.Write([]byte(hello))
	}
	waitFor(t, "the server to take every connection", func() bool {
		return s.Stats().Evicted == flood-maxPending
	})
	close(stop)
	wg.Wait()

	st := s.Stats()
	if st.Pending != maxPending || maxSeen.Load() > maxPending {
		t.Errorf("pending %d (at most %d seen), want the cap %d", st.Pending, maxSeen.Load(), maxPending)
	}
	// Memory: the old server held a 64 KiB read buffer and a goroutine per
	// connection (about 190 MiB here). Now only MaxPending handshakes live, on
	// fixed arrays; the test's own client sockets are in the figure too.
	memAfter, goAfter := memInUse(), runtime.NumGoroutine()
	if grew := int64(memAfter) - int64(memBefore); grew > 8<<20 {
		t.Errorf("heap and stacks grew by %d KiB for %d stalled connections", grew>>10, flood)
	}
	if grew := goAfter - goBefore; grew > maxPending+8 {
		t.Errorf("%d more goroutines for %d stalled connections (cap %d)", grew, flood, maxPending)
	}
	t.Logf("%d stalled connections: heap and stacks %+d KiB, goroutines %+d, %+v",
		flood, (int64(memAfter)-int64(memBefore))>>10, goAfter-goBefore, st)

	// Meanwhile the connected client works, and a new one gets in: it
	// pushes out the oldest stalled connection.
	var res echoResult
	if err := c.Call(t.Context(), "test.Echo", echoArgs{"still", 1}, nil, &res); err != nil || res.N != 2 {
		t.Fatalf("connected client during the flood: %v", err)
	}
	c2 := dialTest(t, addr, ClientOptions{})
	if err := c2.Call(t.Context(), "test.Echo", echoArgs{"new", 2}, nil, &res); err != nil || res.Greeting != "hello new" {
		t.Fatalf("new client during the flood: %v", err)
	}
	if st := s.Stats(); st.Conns != 2 || st.Pending > maxPending {
		t.Errorf("after the new client: %+v", st)
	}
}

// A connection that does not finish its handshake is closed after
// HandshakeTimeout.
func TestHandshakeTimeout(t *testing.T) {
	s, addr := startServer(t, ServerOptions{HandshakeTimeout: 100 * time.Millisecond}, registerEcho)
	nc := rawConn(t, addr, false)
	nc.Write([]byte("0123456789"))
	got := expectClosed(t, nc)
	if len(got) != serverHelloSize {
		t.Errorf("got %d bytes, want just the hello", len(got))
	}
	waitFor(t, "the pending table to empty", func() bool { return s.Stats().Pending == 0 })
}

// Authenticated connections past MaxConns are refused with a clear error,
// and admitted again once others close.
func TestMaxConns(t *testing.T) {
	s, addr := startServer(t, ServerOptions{MaxConns: 2}, registerEcho)
	a := rawConn(t, addr, true)
	rawConn(t, addr, true)
	_, err := Dial(addr, testSecret, ClientOptions{})
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "connection limit (2)") {
		t.Fatalf("third connection: got %v, want ErrUnavailable naming the limit", err)
	}
	if st := s.Stats(); st.Refused != 1 || st.Conns != 2 {
		t.Errorf("stats %+v", st)
	}
	a.Close()
	waitFor(t, "the closed connection to be released", func() bool { return s.Stats().Conns == 1 })
	c := dialTest(t, addr, ClientOptions{})
	if err := c.Call(t.Context(), "test.Echo", echoArgs{}, nil, nil); err != nil {
		t.Fatal(err)
	}
}
