package rpc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

var testSecret = []byte("0123456789abcdef-poolfs-test")

// startServer starts a server on 127.0.0.1:0 with handlers registered by
// reg, and closes it at cleanup.
func startServer(t testing.TB, opts ServerOptions, reg func(s *Server)) (*Server, string) {
	t.Helper()
	s := NewServer(testSecret, opts)
	if reg != nil {
		reg(s)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		s.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return s, ln.Addr().String()
}

func dialTest(t testing.TB, addr string, opts ClientOptions) *Client {
	t.Helper()
	c, err := Dial(addr, testSecret, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

type echoArgs struct {
	Name string
	N    int
}

type echoResult struct {
	Greeting string
	N        int
	BodyLen  int
}

func registerEcho(s *Server) {
	s.Handle("test.Echo", func(ctx context.Context, req *Request) (*Response, error) {
		var a echoArgs
		if err := json.Unmarshal(req.Args, &a); err != nil {
			return nil, err
		}
		body := bytes.Clone(req.Body) // Body is reused after we return
		return &Response{Result: echoResult{"hello " + a.Name, a.N + 1, len(req.Body)}, Body: body}, nil
	})
}

func TestRoundTrip(t *testing.T) {
	_, addr := startServer(t, ServerOptions{}, registerEcho)
	c := dialTest(t, addr, ClientOptions{})
	// Sizes around the record and write-batch boundaries.
	for _, size := range []int{0, 1, 100, recordMax - 1, recordMax, recordMax + 1, 2 * recordMax, writeBatch + 1, 4 << 20} {
		t.Run(fmt.Sprintf("body=%d", size), func(t *testing.T) {
			body := make([]byte, size)
			for i := range body {
				body[i] = byte(rand.Uint32())
			}
			var res echoResult
			got, err := c.CallBody(t.Context(), "test.Echo", echoArgs{"pool", 41}, body, &res, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res != (echoResult{"hello pool", 42, size}) {
				t.Errorf("result %+v", res)
			}
			if !bytes.Equal(got, body) {
				t.Errorf("body of %d bytes came back as %d bytes, different", size, len(got))
			}
			// Into a caller buffer, reused when big enough.
			dst := make([]byte, 0, size+10)
			got, err = c.CallBody(t.Context(), "test.Echo", echoArgs{}, body, nil, dst)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, body) || (size > 0 && &got[0] != &dst[:1][0]) {
				t.Errorf("body not read into dst")
			}
			// Call discards the response body; the connection stays in step.
			if err := c.Call(t.Context(), "test.Echo", echoArgs{N: 1}, body, &res); err != nil || res.N != 2 {
				t.Fatalf("Call: %v %+v", err, res)
			}
		})
	}
}

// Args and results larger than a record: the name-and-args section spans
// records, and its first record gathers the name and the start of the args.
func TestRoundTripLargeArgs(t *testing.T) {
	_, addr := startServer(t, ServerOptions{}, registerEcho)
	c := dialTest(t, addr, ClientOptions{})
	for _, n := range []int{recordMax - 20, recordMax, 3*recordMax + 7} {
		name := strings.Repeat("n", n)
		var res echoResult
		if err := c.Call(t.Context(), "test.Echo", echoArgs{name, 1}, []byte("b"), &res); err != nil {
			t.Fatalf("args of %d bytes: %v", n, err)
		}
		if res != (echoResult{"hello " + name, 2, 1}) {
			t.Fatalf("args of %d bytes: result differs", n)
		}
	}
}

var (
	errNotFound = errors.New("meta: not found")
	errExists   = errors.New("meta: exists")
)

func TestErrors(t *testing.T) {
	table := NewErrorTable("notfound", errNotFound, "exists", errExists)
	_, addr := startServer(t, ServerOptions{Errors: table}, func(s *Server) {
		s.Handle("test.Fail", func(ctx context.Context, req *Request) (*Response, error) {
			var which string
			json.Unmarshal(req.Args, &which)
			switch which {
			case "notfound":
				return nil, fmt.Errorf("lookup %q: %w", "/a/b", errNotFound)
			case "other":
				return nil, errors.New("disk on fire")
			case "panic":
				panic("boom")
			case "deadline":
				return nil, context.DeadlineExceeded
			}
			return &Response{Result: "ok"}, nil
		})
	})
	c := dialTest(t, addr, ClientOptions{Errors: table})
	tests := []struct {
		arg      string
		sentinel error
		code     string
		msg      string
	}{
		{"notfound", errNotFound, "notfound", `lookup "/a/b": meta: not found`},
		{"other", ErrInternal, "internal", "disk on fire"},
		{"panic", ErrInternal, "internal", "rpc: internal server error: test.Fail panicked: boom"},
		{"deadline", context.DeadlineExceeded, "deadline", "context deadline exceeded"},
	}
	for _, tt := range tests {
		t.Run(tt.arg, func(t *testing.T) {
			err := c.Call(t.Context(), "test.Fail", tt.arg, nil, nil)
			var re *RemoteError
			if !errors.As(err, &re) || re.Code != tt.code || re.Msg != tt.msg {
				t.Fatalf("got %#v, want code %q msg %q", err, tt.code, tt.msg)
			}
			if !errors.Is(err, tt.sentinel) || errors.Is(err, errExists) {
				t.Errorf("errors.Is(%v, %v) is false", err, tt.sentinel)
			}
			// The server survives, and so does the connection.
			var ok string
			if err := c.Call(t.Context(), "test.Fail", "fine", nil, &ok); err != nil || ok != "ok" {
				t.Fatalf("after error: %v %q", err, ok)
			}
		})
	}
	t.Run("nomethod", func(t *testing.T) {
		err := c.Call(t.Context(), "test.Missing", nil, []byte("some body"), nil)
		if !errors.Is(err, ErrNoMethod) {
			t.Fatalf("got %v, want ErrNoMethod", err)
		}
	})
	t.Run("client without table", func(t *testing.T) {
		c2 := dialTest(t, addr, ClientOptions{})
		err := c2.Call(t.Context(), "test.Fail", "notfound", nil, nil)
		var re *RemoteError
		if !errors.As(err, &re) || re.Code != "notfound" || errors.Is(err, errNotFound) {
			t.Fatalf("got %v", err)
		}
	})
}

func TestConcurrency(t *testing.T) {
	_, addr := startServer(t, ServerOptions{}, registerEcho)
	c := dialTest(t, addr, ClientOptions{MaxConns: 16}) // fewer conns than callers: some wait
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Go(func() {
			body := make([]byte, g*100)
			for i := range 100 {
				if len(body) > 0 {
					body[i%len(body)] = byte(i)
				}
				var res echoResult
				got, err := c.CallBody(t.Context(), "test.Echo", echoArgs{fmt.Sprint(g), i}, body, &res, nil)
				if err != nil {
					t.Error(err)
					return
				}
				if res.N != i+1 || res.Greeting != "hello "+fmt.Sprint(g) || !bytes.Equal(got, body) {
					t.Errorf("goroutine %d call %d: mixed up response %+v", g, i, res)
					return
				}
			}
		})
	}
	wg.Wait()
}

// blockingServer serves "test.Block", which waits for its context to end
// and reports that on cancelled.
func blockingServer(t *testing.T) (s *Server, addr string, started, cancelled chan struct{}) {
	started, cancelled = make(chan struct{}, 16), make(chan struct{}, 16)
	s, addr = startServer(t, ServerOptions{}, func(s *Server) {
		registerEcho(s)
		s.Handle("test.Block", func(ctx context.Context, req *Request) (*Response, error) {
			started <- struct{}{}
			<-ctx.Done()
			cancelled <- struct{}{}
			return nil, ctx.Err()
		})
	})
	return s, addr, started, cancelled
}

func TestCancelMidCall(t *testing.T) {
	_, addr, started, cancelled := blockingServer(t)
	c := dialTest(t, addr, ClientOptions{})
	ctx, cancel := context.WithCancel(t.Context())
	go func() { <-started; cancel() }()
	err := c.Call(ctx, "test.Block", nil, nil, nil)
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrUnavailable) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	select {
	case <-cancelled: // the server saw the connection go and cancelled the handler
	case <-time.After(5 * time.Second):
		t.Fatal("handler context not cancelled after client hung up")
	}
	// Deadline, then the client is still usable.
	ctx, cancel2 := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel2()
	if err := c.Call(ctx, "test.Block", nil, nil, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want DeadlineExceeded", err)
	}
	if err := c.Call(t.Context(), "test.Echo", echoArgs{}, nil, nil); err != nil {
		t.Fatal(err)
	}
}

func TestServerCloseInFlight(t *testing.T) {
	s, addr, started, cancelled := blockingServer(t)
	c := dialTest(t, addr, ClientOptions{})
	const n = 4
	errs := make(chan error, n)
	for range n {
		go func() { errs <- c.Call(t.Context(), "test.Block", nil, nil, nil) }()
	}
	for range n {
		<-started
	}
	s.Close()
	if len(cancelled) != n {
		t.Errorf("Close returned with %d of %d handlers done", len(cancelled), n)
	}
	for range n {
		if err := <-errs; !errors.Is(err, ErrUnavailable) {
			t.Errorf("got %v, want ErrUnavailable", err)
		}
	}
	if err := c.Call(t.Context(), "test.Echo", echoArgs{}, nil, nil); !errors.Is(err, ErrUnavailable) {
		t.Errorf("after Close: got %v, want ErrUnavailable", err)
	}
}

func TestServerRestartIdleConn(t *testing.T) {
	// A pooled connection to a server that went away is found dead before
	// use, so the first call after a restart does not fail.
	s := NewServer(testSecret, ServerOptions{})
	registerEcho(s)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	go s.Serve(ln)
	c := dialTest(t, addr, ClientOptions{})
	if err := c.Call(t.Context(), "test.Echo", echoArgs{}, nil, nil); err != nil {
		t.Fatal(err)
	}
	s.Close()
	ln2, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("cannot rebind %s: %v", addr, err)
	}
	s2 := NewServer(testSecret, ServerOptions{})
	registerEcho(s2)
	go s2.Serve(ln2)
	t.Cleanup(func() { s2.Close() })
	time.Sleep(10 * time.Millisecond) // let the FIN arrive
	if err := c.Call(t.Context(), "test.Echo", echoArgs{}, nil, nil); err != nil {
		t.Fatalf("first call after restart: %v", err)
	}
}

func TestClientClose(t *testing.T) {
	_, addr := startServer(t, ServerOptions{}, registerEcho)
	c := dialTest(t, addr, ClientOptions{})
	c.Close()
	if err := c.Call(t.Context(), "test.Echo", echoArgs{}, nil, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("got %v, want ErrClosed", err)
	}
}

func TestOptions(t *testing.T) {
	if _, err := Dial("127.0.0.1:1", []byte("short"), ClientOptions{}); err == nil {
		t.Error("short secret accepted by Dial")
	}
	if _, err := Dial("127.0.0.1:1", testSecret, ClientOptions{MaxConns: -1}); err == nil {
		t.Error("negative MaxConns accepted")
	}
	s := NewServer([]byte("short"), ServerOptions{})
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	if err := s.Serve(ln); err == nil {
		t.Error("Serve with short secret succeeded")
	}
	for _, o := range []ServerOptions{{MaxPending: -1}, {MaxConns: -1}, {HandshakeTimeout: -time.Second}} {
		s := NewServer(testSecret, o)
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		if err := s.Serve(ln); err == nil {
			t.Errorf("Serve with %+v succeeded", o)
		}
	}
}
