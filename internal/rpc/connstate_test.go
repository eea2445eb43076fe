package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type tagKey struct{}

// A client's OnDial hook binds every pooled connection; handlers see the
// binding through their context (an interceptor puts it there).
func TestConnStateBinding(t *testing.T) {
	var binds atomic.Int32
	_, addr := startServer(t, ServerOptions{}, func(s *Server) {
		s.Intercept(func(ctx context.Context) context.Context {
			return context.WithValue(ctx, tagKey{}, ConnStateFrom(ctx))
		})
		s.Handle("bind", func(ctx context.Context, req *Request) (*Response, error) {
			var tag string
			if err := json.Unmarshal(req.Args, &tag); err != nil {
				return nil, err
			}
			if tag == "bad" {
				return nil, errors.New("refused")
			}
			binds.Add(1)
			ConnStateFrom(ctx).Set(tagKey{}, tag)
			return nil, nil
		})
		s.Handle("who", func(ctx context.Context, req *Request) (*Response, error) {
			st := ctx.Value(tagKey{}).(*ConnState)
			time.Sleep(2 * time.Millisecond) // keep connections busy: the pool grows
			return &Response{Result: st.Get(tagKey{})}, nil
		})
	})
	c := dialTest(t, addr, ClientOptions{})
	var got string
	if err := c.Call(context.Background(), "who", nil, nil, &got); err != nil || got != "" {
		t.Fatalf("before binding: %q, %v", got, err)
	}
	c.OnDial(func(ctx context.Context, call CallConn) error { return call(ctx, "bind", "alice", nil) })
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				var got string
				if err := c.Call(context.Background(), "who", nil, nil, &got); err != nil {
					errs <- err
					return
				}
				if got != "alice" {
					errs <- errors.New("unbound connection answered " + got)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := binds.Load(); n < 2 {
		t.Fatalf("%d connections bound; want the pool's several", n)
	}
	// A failing hook fails the call that needed a new connection.
	c.OnDial(func(ctx context.Context, call CallConn) error { return call(ctx, "bind", "bad", nil) })
	err := c.Call(context.Background(), "who", nil, nil, &got)
	var re *RemoteError
	if !errors.As(err, &re) {
		t.Fatalf("call after failing hook: %v, want the hook's remote error", err)
	}
}
