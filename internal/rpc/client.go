package rpc

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"poolfs/internal/identity"
)

// ClientOptions configures a Client. Zero values mean the documented default.
type ClientOptions struct {
	MaxConns    int           // most connections open at once; default 64
	MaxBody     int64         // largest request or response body; default DefaultMaxBody
	DialTimeout time.Duration // to connect (not authenticate) each connection; default 10s
	Errors      *ErrorTable   // decodes remote error codes; default: built-ins only
	// Identity, if set, holds the certificate and key the client presents
	// to the server; a server that trusts a CA refuses a client without
	// one. When it is replaced (renewal), connections opened with the
	// one before are not reused: each call after opens new ones.
	Identity *identity.Current
	// Peers, if set, is which servers the client accepts: the server must
	// present a certificate it accepts (its Roles say which roles may
	// serve this client), else Dial and calls fail with ErrAuth.
	Peers *identity.Trust
	// RecheckEvery is how often, with Peers set, the client checks its
	// connections' server certificates again (recheck.go): it closes
	// idle connections to servers revoked or expired since their
	// handshake and breaks calls in flight to revoked ones. Every
	// connection is also checked before it is reused. Default
	// DefaultRecheckEvery.
	RecheckEvery time.Duration
}

// Validate rejects negative values.
func (o ClientOptions) Validate() error {
	if o.MaxConns < 0 || o.MaxBody < 0 || o.DialTimeout < 0 || o.RecheckEvery < 0 {
		return fmt.Errorf("rpc: negative client option in %+v", o)
	}
	return nil
}

// Client calls one server address over a pool of authenticated connections.
// Each connection carries one call at a time; a call takes an idle
// connection or opens a new one, up to MaxConns, then waits. A Client is
// safe for concurrent use. Calls are never retried.
type Client struct {
	addr    string
	secret  []byte
	errs    *ErrorTable
	maxBody int64
	dialer  net.Dialer
	slots   chan struct{} // one token per connection in use or being dialed
	pool    bufPool       // record buffers of all connections
	// identity and peers are ClientOptions.Identity and Peers.
	identity *identity.Current
	peers    *identity.Trust
	// recheckEvery is ClientOptions.RecheckEvery; stopRecheck ends
	// recheckLoop (nil: none runs).
	recheckEvery time.Duration
	stopRecheck  chan struct{}

	mu struct {
		sync.Mutex
		closed bool
		idle   []*clientConn // most recently used last
		busy   map[*clientConn]struct{}
		onDial func(context.Context, CallConn) error
	}
}

type clientConn struct {
	nc     net.Conn
	raw    syscall.RawConn // nil if nc is not a syscall.Conn
	fr     frameReader
	fw     frameWriter
	nextID uint64
	peer   *identity.Cert     // the server's verified certificate, or nil
	own    *identity.Identity // the identity the client presented on it
	// refused, guarded by Client.mu, is set when recheck closed the
	// connection in use because its server was revoked.
	refused error

	idleSince time.Time // when put back in the pool; used by alive
	peek      peekState
}

// Dial returns a client for addr, after opening and authenticating one
// connection to check that the server is up and shares secret. Errors wrap
// ErrAuth (wrong secret), ErrUnavailable (no server) or ErrProtocol.
func Dial(addr string, secret []byte, opts ClientOptions) (*Client, error) {
	if err := errors.Join(checkSecret(secret), opts.Validate()); err != nil {
		return nil, err
	}
	c := &Client{
		addr:    addr,
		secret:  append([]byte(nil), secret...),
		errs:    opts.Errors,
		maxBody: cmpOr(opts.MaxBody, DefaultMaxBody),
		slots:   make(chan struct{}, cmpOr(opts.MaxConns, 64)),
		dialer:  net.Dialer{Timeout: cmpOr(opts.DialTimeout, handshakeTimeout)},

		identity:     opts.Identity,
		peers:        opts.Peers,
		recheckEvery: cmpOr(opts.RecheckEvery, DefaultRecheckEvery),
	}
	c.mu.busy = make(map[*clientConn]struct{})
	cc, err := c.dialRetry(context.Background())
	if err != nil {
		return nil, fmt.Errorf("rpc: dial %s: %w", addr, err)
	}
	cc.idleSince = time.Now()
	c.mu.idle = append(c.mu.idle, cc)
	if c.peers != nil {
		c.stopRecheck = make(chan struct{})
		go c.recheckLoop(c.stopRecheck)
	}
	return c, nil
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Close closes idle connections; connections in use are closed when their
// call ends. Later calls return ErrClosed.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.mu.closed && c.stopRecheck != nil {
		close(c.stopRecheck)
	}
	c.mu.closed = true
	for _, cc := range c.mu.idle {
		cc.nc.Close()
	}
	c.mu.idle = nil
	return nil
}

// Call invokes method with args (JSON-encoded; nil sends none) and body
// (sent as is, never retained), and decodes the JSON result into result
// (ignored if nil). A response body is discarded. Errors: *RemoteError
// (errors.Is works with the ErrorTable's sentinels), ctx.Err(), or
// wrapped ErrUnavailable, ErrProtocol or ErrClosed.
func (c *Client) Call(ctx context.Context, method string, args any, body []byte, result any) error {
	_, err := c.call(ctx, method, args, body, result, nil, false)
	return err
}

// CallBody is Call that also returns the response body. The body is read
// into dst[:n] if cap(dst) >= n (so the caller can pass a pooled or aligned
// buffer), else into a new slice. The caller owns the returned slice. If
// the call fails, dst may hold part of the response body.
func (c *Client) CallBody(ctx context.Context, method string, args any, body []byte, result any, dst []byte) ([]byte, error) {
	return c.call(ctx, method, args, body, result, dst, true)
}

func (c *Client) call(ctx context.Context, method string, args any, body []byte, result any, dst []byte, wantBody bool) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, c.wrap(method, err)
	}
	var argBytes []byte
	if args != nil {
		var err error
		if argBytes, err = json.Marshal(args); err != nil {
			return nil, fmt.Errorf("rpc: encode args of %s: %w", method, err)
		}
	}
	cc, err := c.get(ctx)
	if err != nil {
		return nil, c.wrap(method, err)
	}
	var stop func() bool
	if ctx.Done() != nil {
		stop = context.AfterFunc(ctx, func() { cc.nc.SetDeadline(time.Unix(1, 0)) })
	}
	out, connOK, err := cc.roundTrip(c, method, argBytes, body, result, dst, wantBody)
	if stop != nil && !stop() {
		// ctx ended during the call: the deadline broke the connection.
		connOK = false
		if err != nil {
			err = ctx.Err()
		}
	}
	if err != nil {
		c.mu.Lock()
		if cc.refused != nil { // recheck broke it: say why
			err, connOK = cc.refused, false
		}
		c.mu.Unlock()
	}
	c.put(cc, connOK)
	if err != nil {
		return nil, c.wrap(method, err)
	}
	return out, nil
}

// wrap adds the address and method to local errors; remote errors pass as is.
func (c *Client) wrap(method string, err error) error {
	switch {
	case errors.As(err, new(*RemoteError)):
		return err
	case errors.Is(err, ErrTampered):
		// Broken in transit, like a reset connection: the outcome is
		// unknown, and callers that go around unreachable servers should.
		return fmt.Errorf("rpc: call %s on %s: %w: %w", method, c.addr, ErrUnavailable, err)
	case errors.Is(err, ErrProtocol), errors.Is(err, ErrAuth), errors.Is(err, ErrClosed),
		errors.Is(err, ErrUnavailable), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, errLocal):
		return fmt.Errorf("rpc: call %s on %s: %w", method, c.addr, err)
	}
	return fmt.Errorf("rpc: call %s on %s: %w: %w", method, c.addr, ErrUnavailable, err)
}

// errLocal marks errors of the caller's making (bad result type, body too
// large) that say nothing about the server's health.
var errLocal = errors.New("rpc: local error")

// roundTrip sends one request and reads its response. connOK reports
// whether the connection is still in step and may be reused.
func (cc *clientConn) roundTrip(c *Client, method string, args, body []byte, result any, dst []byte, wantBody bool) (out []byte, connOK bool, err error) {
	if int64(len(body)) > c.maxBody || len(method) > maxMethodLen || len(args) > maxArgsLen {
		return nil, true, fmt.Errorf("%w: request over limits (method %d, args %d, body %d bytes)", errLocal, len(method), len(args), len(body))
	}
	cc.nextID++
	id := cc.nextID
	if err := cc.fw.write(typeRequest, id, method, args, body); err != nil {
		return nil, false, err
	}
	h, err := cc.fr.readHeader()
	if err != nil {
		return nil, false, err
	}
	if h.id != id || (h.typ != typeResponse && h.typ != typeError) || (h.typ == typeError && h.bodyLen != 0) {
		return nil, false, fmt.Errorf("%w: unexpected frame type %d id %d (want %d)", ErrProtocol, h.typ, h.id, id)
	}
	name, res, err := cc.fr.readMeta(h)
	if err != nil {
		return nil, false, err
	}
	if h.typ == typeError {
		code := string(name)
		return nil, true, &RemoteError{Code: code, Msg: string(res), sentinel: c.errs.decode(code)}
	}
	if !wantBody {
		if err := cc.fr.discardBody(h.bodyLen); err != nil {
			return nil, false, err
		}
	} else {
		if cap(dst) >= h.bodyLen {
			out = dst[:h.bodyLen]
		} else {
			out = make([]byte, h.bodyLen)
		}
		if err := cc.fr.readBody(out); err != nil {
			return nil, false, err
		}
	}
	if result != nil && len(res) > 0 {
		if err := json.Unmarshal(res, result); err != nil {
			return nil, true, fmt.Errorf("%w: decode result: %w", errLocal, err)
		}
	}
	return out, true, nil
}

// get takes a connection slot and returns an idle connection or a new one.
func (c *Client) get(ctx context.Context) (*clientConn, error) {
	select {
	case c.slots <- struct{}{}:
	default:
		select {
		case c.slots <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	for {
		c.mu.Lock()
		if c.mu.closed {
			c.mu.Unlock()
			<-c.slots
			return nil, ErrClosed
		}
		var cc *clientConn
		if n := len(c.mu.idle); n > 0 {
			cc = c.mu.idle[n-1]
			c.mu.idle[n-1] = nil
			c.mu.idle = c.mu.idle[:n-1]
		}
		if cc != nil {
			c.mu.busy[cc] = struct{}{}
		}
		c.mu.Unlock()
		if cc == nil {
			break
		}
		if cc.own == c.identity.Get() && c.stale(cc) == nil && cc.alive() {
			return cc, nil
		}
		// The server hung up while it sat idle, or is no longer
		// accepted: a new connection checks it in full.
		c.forget(cc)
	}
	cc, err := c.dialRetry(ctx)
	if err != nil {
		<-c.slots
		return nil, err
	}
	c.mu.Lock()
	c.mu.busy[cc] = struct{}{}
	c.mu.Unlock()
	return cc, nil
}

// dialAttempts bounds the connections one call opens when the server
// closes each during its handshake.
const dialAttempts = 3

// dialRetry is dial, tried again (up to dialAttempts, 50 ms and then
// 100 ms apart) when the server accepted the connection and closed it
// before the handshake ended: a server sheds connections that way (the
// oldest unauthenticated ones beyond MaxPending, those past its handshake
// timeout on a starved machine), and no request was sent, so another
// connection is always safe. A refusal (wrong secret, certificate, full
// server), a connection refused and a timeout are not tried again: they
// would say the same, or detecting a dead server would take longer.
func (c *Client) dialRetry(ctx context.Context) (*clientConn, error) {
	for attempt := 1; ; attempt++ {
		cc, err := c.dial(ctx)
		if err == nil || attempt == dialAttempts || !droppedInHandshake(err) {
			return cc, err
		}
		t := time.NewTimer(time.Duration(attempt) * 50 * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
}

// droppedInHandshake reports whether a dial failed because the server
// closed the connection in the handshake.
func droppedInHandshake(err error) bool {
	return !errors.Is(err, ErrAuth) && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET))
}

// put gives back the slot of cc and keeps cc for reuse if ok.
func (c *Client) put(cc *clientConn, ok bool) {
	c.mu.Lock()
	delete(c.mu.busy, cc)
	if ok && !c.mu.closed && cc.refused == nil {
		cc.idleSince = time.Now()
		c.mu.idle = append(c.mu.idle, cc)
	} else {
		cc.nc.Close()
	}
	c.mu.Unlock()
	<-c.slots
}

// forget closes cc, taken from the pool, and drops it from the busy set.
func (c *Client) forget(cc *clientConn) {
	cc.nc.Close()
	c.mu.Lock()
	delete(c.mu.busy, cc)
	c.mu.Unlock()
}

// dial opens and authenticates a connection, honouring ctx and the
// handshake timeout.
func (c *Client) dial(ctx context.Context) (*clientConn, error) {
	nc, err := c.dialer.DialContext(ctx, "tcp", c.addr)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	cc := &clientConn{
		nc: nc,
		fr: frameReader{br: bufio.NewReaderSize(nc, readBufSize), maxBody: c.maxBody, pool: &c.pool},
		fw: frameWriter{w: nc, maxBody: c.maxBody, pool: &c.pool},
	}
	if sc, ok := nc.(syscall.Conn); ok {
		cc.raw, _ = sc.SyscallConn()
	}
	deadline := time.Now().Add(handshakeTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	nc.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Unix(1, 0)) })
	nonce := make([]byte, nonceSize)
	rand.Read(nonce)
	eph, err := newEphemeralKey()
	if err == nil {
		var transcript []byte
		cc.fw.cs, cc.fr.cs, transcript, err = clientHandshake(cc.fr.br, nc, c.secret, nonce, eph)
		if err == nil {
			cc.own = c.identity.Get()
			cc.peer, err = c.clientIdentity(&cc.fr, &cc.fw, transcript, cc.own)
		}
	}
	if !stop() && err == nil {
		err = ctx.Err()
	}
	if err != nil {
		nc.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, ErrAuth) || errors.Is(err, ErrProtocol) || errors.Is(err, ErrUnavailable) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: handshake: %w", ErrUnavailable, err)
	}
	nc.SetDeadline(time.Time{})
	c.mu.Lock()
	hook := c.mu.onDial
	c.mu.Unlock()
	if hook != nil {
		err := hook(ctx, func(ctx context.Context, method string, args any, result any) error {
			return cc.call(ctx, c, method, args, result)
		})
		if err != nil {
			nc.Close()
			return nil, fmt.Errorf("rpc: on-dial hook: %w", err)
		}
	}
	return cc, nil
}
