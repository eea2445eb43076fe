package rpc

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"
)

// Connection state. Some services bind a connection to something the
// client set up once (the metadata service binds it to the client's
// session). A Server gives every handler of one connection the same
// ConnState (ConnStateFrom); a Client runs its OnDial hook on every new
// connection before any call, so each pooled connection is bound the same
// way, also after a reconnect.

// ConnState is per-connection storage on the server side, safe for
// concurrent use.
type ConnState struct {
	mu   sync.Mutex
	vals map[any]any
}

// Set stores v under k for the rest of the connection.
func (c *ConnState) Set(k, v any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.vals == nil {
		c.vals = map[any]any{}
	}
	c.vals[k] = v
}

// Get returns the value stored under k, or nil.
func (c *ConnState) Get(k any) any {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.vals[k]
}

type connStateKey struct{}

// ConnStateFrom returns the state of the connection a handler's ctx
// belongs to; outside a handler it returns a fresh, unshared state.
func ConnStateFrom(ctx context.Context) *ConnState {
	if c, ok := ctx.Value(connStateKey{}).(*ConnState); ok {
		return c
	}
	return &ConnState{}
}

// Intercept registers f to derive the context of every handler call from
// the connection's (f sees ConnStateFrom(ctx)). It must be called before
// Serve; several interceptors run in registration order.
func (s *Server) Intercept(f func(ctx context.Context) context.Context) {
	if s.started.Load() {
		panic("rpc: Intercept called after Serve")
	}
	s.intercept = append(s.intercept, f)
}

// CallConn is a call on one specific connection (OnDial hooks use it).
type CallConn func(ctx context.Context, method string, args any, result any) error

// OnDial sets a hook run on every connection the Client opens from now on,
// after the handshake and before the connection carries any other call; an
// error closes the connection and fails the call that needed it. Idle
// connections opened before are closed, so that every connection used
// after OnDial returns has run the hook.
func (c *Client) OnDial(hook func(ctx context.Context, call CallConn) error) {
	c.mu.Lock()
	c.mu.onDial = hook
	idle := c.mu.idle
	c.mu.idle = nil
	c.mu.Unlock()
	for _, cc := range idle {
		cc.nc.Close()
	}
}

// call is one call on cc outside the pool (the OnDial hook), bounded by
// ctx and the handshake timeout.
func (cc *clientConn) call(ctx context.Context, c *Client, method string, args any, result any) error {
	var argBytes []byte
	if args != nil {
		var err error
		if argBytes, err = json.Marshal(args); err != nil {
			return fmt.Errorf("rpc: encode args of %s: %w", method, err)
		}
	}
	deadline := time.Now().Add(handshakeTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	cc.nc.SetDeadline(deadline)
	defer cc.nc.SetDeadline(time.Time{})
	_, _, err := cc.roundTrip(c, method, argBytes, nil, result, nil, false)
	if err != nil {
		return c.wrap(method, err)
	}
	return nil
}
