package rpc

import (
	"bufio"
	"container/list"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"poolfs/internal/identity"
)

// Request is one incoming call. Method, Args and the Request itself are
// valid only while the handler runs. Body comes from a pool and is reused
// for another request as soon as the handler returns, unless the handler
// calls DetachBody.
type Request struct {
	Method string
	Args   []byte // JSON, possibly empty
	Body   []byte // raw bytes, possibly empty

	pooled *[]byte // Body's pool handle; nil once detached
}

// DetachBody hands Body to the caller for good: the server will not reuse
// it. Call it before the handler returns to keep the body (for example, to
// queue it for a disk write).
func (r *Request) DetachBody() []byte {
	r.pooled = nil
	return r.Body
}

// Response is a handler's reply. Result is JSON-encoded (nil sends no
// result). Body is sent as raw bytes; the server does not retain it after
// Done is called.
type Response struct {
	Result any
	Body   []byte
	// Done, if non-nil, is called exactly once after Body has been written
	// (or the write failed), so the handler can recycle Body.
	Done func()
}

// HandlerFunc serves one method. ctx is cancelled when the connection closes
// or the server stops. An error is sent to the client as a *RemoteError
// carrying the code of the first sentinel in the ErrorTable it matches
// (errors.Is), else "internal". A nil *Response with a nil error is an empty
// reply.
type HandlerFunc func(ctx context.Context, req *Request) (*Response, error)

// ServerOptions configures a Server. Zero values mean the documented default.
type ServerOptions struct {
	Logger  *slog.Logger // default: discard
	MaxBody int64        // largest request or response body; default DefaultMaxBody
	Errors  *ErrorTable  // error codes sent to clients; default: built-ins only
	// MaxPending is the most connections kept before they authenticate;
	// a new one past it closes the oldest. Default DefaultMaxPending.
	MaxPending int
	// HandshakeTimeout is how long a connection may take to authenticate;
	// default DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
	// MaxConns is the most authenticated connections open at once; a
	// client past it is refused with ErrUnavailable. Default DefaultMaxConns.
	MaxConns int
	// Observe, if set, is called after every call of a registered method
	// with the method, the time its handler took and the error it
	// returned (metrics). It must not block.
	Observe func(method string, d time.Duration, err error)
	// Identity, if set, holds the certificate and key the server presents
	// to every client (the one held at each handshake: renewal may
	// replace it); a client that trusts a CA refuses a server without one.
	Identity *identity.Current
	// Peers, if set, is whom the server admits: every client must present
	// a certificate it accepts (ErrAuth otherwise). Unset, clients need
	// only the secret.
	Peers *identity.Trust
	// AllowNoCert admits, when Peers is set, a client that presents no
	// certificate (one that presents a bad one is still refused), with no
	// peer: Authorize, which it requires, decides what such a client may
	// call (enrolment, say).
	AllowNoCert bool
	// Authorize, if set, runs before every call of a registered method
	// with the caller's verified certificate (nil if Peers is unset); an
	// error refuses the call with ErrForbidden. It must not block.
	Authorize func(method string, peer *identity.Cert) error
	// RecheckEvery is how often, with Peers set, the server checks its
	// connections' client certificates again and closes those of clients
	// revoked or expired since their handshake (recheck.go); every call
	// is also checked before its handler runs. Default
	// DefaultRecheckEvery.
	RecheckEvery time.Duration
}

// Validate rejects negative limits.
func (o ServerOptions) Validate() error {
	if o.MaxBody < 0 || o.MaxPending < 0 || o.HandshakeTimeout < 0 || o.MaxConns < 0 || o.RecheckEvery < 0 {
		return fmt.Errorf("rpc: negative limit in server options (MaxBody %d, MaxPending %d, HandshakeTimeout %v, MaxConns %d, RecheckEvery %v)",
			o.MaxBody, o.MaxPending, o.HandshakeTimeout, o.MaxConns, o.RecheckEvery)
	}
	if o.AllowNoCert && (o.Peers == nil || o.Authorize == nil) {
		return errors.New("rpc: AllowNoCert needs Peers and Authorize (who may call what without a certificate)")
	}
	return nil
}

// Server serves registered methods to authenticated clients. Each connection
// carries one call at a time; clients open more connections for concurrency.
type Server struct {
	secret  []byte
	log     *slog.Logger
	errs    *ErrorTable
	maxBody int64
	// Admission limits (admission.go).
	maxPending int
	maxConns   int
	hsTimeout  time.Duration
	initErr    error // bad secret or options; returned by Serve
	handlers   map[string]handlerEntry
	started    atomic.Bool
	// intercept derives handler contexts (connstate.go).
	intercept    []func(context.Context) context.Context
	pool         bufPool
	observe      func(method string, d time.Duration, err error) // ServerOptions.Observe
	identity     *identity.Current                               // ServerOptions.Identity
	peers        *identity.Trust                                 // ServerOptions.Peers
	noCertOK     bool                                            // ServerOptions.AllowNoCert
	authorize    func(method string, peer *identity.Cert) error  // ServerOptions.Authorize
	recheckEvery time.Duration                                   // ServerOptions.RecheckEvery

	ctx    context.Context // cancelled by Close; parent of handler contexts
	cancel context.CancelFunc
	wg     sync.WaitGroup // connection goroutines

	mu struct {
		sync.Mutex
		closed     bool
		listeners  map[net.Listener]struct{}
		conns      map[net.Conn]struct{}       // pending and authenticated
		peers      map[net.Conn]*identity.Cert // authenticated with a peer certificate
		rechecking bool                        // recheckLoop started
		pending    *list.List                  // of *pendingConn, oldest first
		authed     int                         // authenticated connections open
		evicted    uint64                      // ServerStats.Evicted
		refused    uint64                      // ServerStats.Refused
	}
}

type handlerEntry struct {
	method string
	h      HandlerFunc
}

// NewServer returns a server authenticating clients with secret (copied;
// at least MinSecretLen bytes). A bad secret or options make Serve fail.
func NewServer(secret []byte, opts ServerOptions) *Server {
	s := &Server{
		secret:       append([]byte(nil), secret...),
		log:          opts.Logger,
		errs:         opts.Errors,
		maxBody:      cmpOr(opts.MaxBody, DefaultMaxBody),
		maxPending:   cmpOr(opts.MaxPending, DefaultMaxPending),
		maxConns:     cmpOr(opts.MaxConns, DefaultMaxConns),
		hsTimeout:    cmpOr(opts.HandshakeTimeout, DefaultHandshakeTimeout),
		handlers:     make(map[string]handlerEntry),
		observe:      opts.Observe,
		identity:     opts.Identity,
		peers:        opts.Peers,
		noCertOK:     opts.AllowNoCert,
		authorize:    opts.Authorize,
		recheckEvery: cmpOr(opts.RecheckEvery, DefaultRecheckEvery),
	}
	s.initErr = errors.Join(checkSecret(secret), opts.Validate())
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.mu.listeners = make(map[net.Listener]struct{})
	s.mu.conns = make(map[net.Conn]struct{})
	s.mu.peers = make(map[net.Conn]*identity.Cert)
	s.mu.pending = list.New()
	return s
}

// Handle registers h for method. It must be called before Serve; it panics
// if called later, if method is empty or longer than 128 bytes, or if the
// method is already registered.
func (s *Server) Handle(method string, h HandlerFunc) {
	switch {
	case s.started.Load():
		panic("rpc: Handle called after Serve")
	case method == "" || len(method) > maxMethodLen:
		panic(fmt.Sprintf("rpc: bad method name %q", method))
	case h == nil:
		panic("rpc: nil handler for " + method)
	}
	if _, dup := s.handlers[method]; dup {
		panic("rpc: method registered twice: " + method)
	}
	s.handlers[method] = handlerEntry{method, h}
}

// Serve accepts connections on ln until Close, then returns nil. It may be
// called for several listeners. Other accept errors are returned.
func (s *Server) Serve(ln net.Listener) error {
	s.started.Store(true)
	if s.initErr != nil {
		ln.Close()
		return s.initErr
	}
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		ln.Close()
		return nil
	}
	s.mu.listeners[ln] = struct{}{}
	if s.peers != nil && !s.mu.rechecking {
		s.mu.rechecking = true
		s.wg.Add(1)
		go s.recheckLoop()
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.mu.listeners, ln)
		s.mu.Unlock()
	}()
	for {
		nc, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.mu.closed
			s.mu.Unlock()
			if closed {
				return nil
			}
			if retryableAccept(err) {
				s.log.Warn("rpc: accept failed, retrying", "addr", ln.Addr(), "err", err)
				time.Sleep(50 * time.Millisecond)
				continue
			}
			return fmt.Errorf("rpc: accept on %s: %w", ln.Addr(), err)
		}
		s.mu.Lock()
		if s.mu.closed {
			s.mu.Unlock()
			nc.Close()
			return nil
		}
		s.mu.conns[nc] = struct{}{}
		el := s.addPendingLocked(nc)
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serveConn(nc, el)
	}
}

// retryableAccept reports whether an accept error is transient: out of file
// descriptors or memory, or a connection aborted before we took it.
func retryableAccept(err error) bool {
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return true
	}
	for _, errno := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED} {
		if errors.Is(err, errno) {
			return true
		}
	}
	return false
}

// Close stops accepting, closes every connection, cancels handler contexts
// and waits for running handlers to return. It is idempotent.
func (s *Server) Close() error {
	s.mu.Lock()
	s.mu.closed = true
	for ln := range s.mu.listeners {
		ln.Close()
	}
	for nc := range s.mu.conns {
		nc.Close()
	}
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	return nil
}

// serverConn is one accepted connection: a reader goroutine (run) that
// parses requests and notices the peer hanging up, and a worker goroutine
// that runs handlers and writes responses, one at a time.
type serverConn struct {
	s    *Server
	nc   net.Conn
	fr   frameReader
	fw   frameWriter
	peer *identity.Cert // the client's verified certificate, or nil
	id   uint64         // id of the current request
	h    handlerEntry   // handler of the current request; h == nil: no such method
	req  Request        // current request
	// hctx is the context of handler calls: the connection's, with its
	// ConnState, through the server's interceptors.
	hctx context.Context
}

// serveConn authenticates nc, then serves it. Until the client has proved
// the secret it holds no buffer but fixed arrays (admission.go).
func (s *Server) serveConn(nc net.Conn, el *list.Element) {
	defer s.wg.Done()
	admitted := false
	defer func() {
		nc.Close()
		s.endConn(nc, el, admitted)
	}()
	var nonce [nonceSize]byte
	rand.Read(nonce[:])
	nc.SetDeadline(time.Now().Add(s.hsTimeout))
	c2s, s2c, transcript, err := serverHandshake(nc, s.secret, nonce[:], func() error {
		err := s.admit(el)
		admitted = err == nil
		return err
	})
	var c *serverConn
	var peer *identity.Cert
	if err == nil {
		c = &serverConn{
			s:  s,
			nc: nc,
			fr: frameReader{br: bufio.NewReaderSize(nc, readBufSize), maxBody: s.maxBody, cs: c2s, pool: &s.pool},
			fw: frameWriter{w: nc, maxBody: s.maxBody, cs: s2c, pool: &s.pool},
		}
		peer, err = s.serverIdentity(&c.fr, &c.fw, transcript)
	}
	if err != nil {
		level := slog.LevelDebug // port scans, health probes, evictions
		if errors.Is(err, ErrAuth) || errors.Is(err, ErrProtocol) || errors.Is(err, errBusy) {
			level = slog.LevelWarn
		}
		s.log.Log(s.ctx, level, "rpc: handshake failed", "remote", nc.RemoteAddr(), "err", err)
		return
	}
	nc.SetDeadline(time.Time{})
	ctx := context.WithValue(s.ctx, connStateKey{}, &ConnState{})
	if peer != nil {
		ctx = context.WithValue(ctx, peerKey{}, peer)
		c.peer = peer
		s.mu.Lock()
		s.mu.peers[nc] = peer
		s.mu.Unlock()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hctx := ctx
	for _, f := range s.intercept {
		hctx = f(hctx)
	}
	c.hctx = hctx
	c.run(ctx, cancel)
}

func (c *serverConn) run(ctx context.Context, cancel context.CancelFunc) {
	work := make(chan struct{})
	idle := make(chan struct{}, 1) // holds a token while the worker is idle
	idle <- struct{}{}
	c.s.wg.Add(1)
	go c.worker(ctx, work, idle)
	defer close(work)
	defer cancel() // before close(work): a running handler sees ctx done
	for {
		h, err := c.fr.readHeader()
		if err == nil {
			select {
			case <-idle: // previous response written; scratch buffers free
			case <-ctx.Done():
				return
			}
			err = c.readRequest(h)
		}
		if err != nil {
			if errors.Is(err, ErrProtocol) {
				c.s.log.Warn("rpc: dropping connection", "remote", c.nc.RemoteAddr(), "err", err)
			} else if err != io.EOF && ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
				c.s.log.Debug("rpc: connection lost", "remote", c.nc.RemoteAddr(), "err", err)
			}
			return
		}
		work <- struct{}{}
	}
}

// readRequest reads the rest of the request h into c.req.
func (c *serverConn) readRequest(h header) error {
	if h.typ != typeRequest {
		return fmt.Errorf("%w: frame type %d from client", ErrProtocol, h.typ)
	}
	name, args, err := c.fr.readMeta(h)
	if err != nil {
		return err
	}
	c.id = h.id
	c.h = c.s.handlers[string(name)]
	c.req = Request{Method: c.h.method, Args: args}
	if c.h.h == nil {
		c.req.Method = string(name)
		return c.fr.discardBody(h.bodyLen)
	}
	c.req.pooled, c.req.Body = c.s.pool.get(h.bodyLen)
	if err := c.fr.readBody(c.req.Body); err != nil {
		c.s.pool.put(c.req.pooled)
		return err
	}
	return nil
}

func (c *serverConn) worker(ctx context.Context, work <-chan struct{}, idle chan<- struct{}) {
	defer c.s.wg.Done()
	for range work {
		var resp *Response
		err := c.s.recheckPeer(c.peer)
		if err == nil {
			resp, err = c.s.invoke(c.hctx, c.h, &c.req)
		}
		werr := c.writeResponse(resp, err)
		if resp != nil && resp.Done != nil {
			resp.Done()
		}
		c.s.pool.put(c.req.pooled)
		c.req = Request{}
		if werr != nil || errors.As(err, new(*peerRefusedError)) {
			c.nc.Close() // the reader notices and ends the connection
		}
		idle <- struct{}{}
	}
}

// invoke runs the handler, turning a panic into an ErrInternal error.
func (s *Server) invoke(ctx context.Context, e handlerEntry, req *Request) (resp *Response, err error) {
	if e.h == nil {
		return nil, fmt.Errorf("%w: %q", ErrNoMethod, req.Method)
	}
	if s.authorize != nil {
		if err := s.authorize(e.method, PeerFrom(ctx)); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrForbidden, e.method, err)
		}
	}
	if s.observe != nil {
		start := time.Now()
		defer func() { s.observe(e.method, time.Since(start), err) }() // after the recover below
	}
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("rpc: handler panicked", "method", req.Method, "panic", r, "stack", string(debug.Stack()))
			resp, err = nil, fmt.Errorf("%w: %s panicked: %v", ErrInternal, req.Method, r)
		}
	}()
	return e.h(ctx, req)
}

func (c *serverConn) writeResponse(resp *Response, err error) error {
	var result []byte
	if err == nil && resp != nil && resp.Result != nil {
		result, err = json.Marshal(resp.Result)
		if err != nil {
			err = fmt.Errorf("%w: encode result of %s: %v", ErrInternal, c.req.Method, err)
		}
	}
	if err != nil {
		msg := err.Error()
		if len(msg) > maxArgsLen {
			msg = msg[:maxArgsLen]
		}
		return c.fw.write(typeError, c.id, c.s.errs.encode(err), []byte(msg), nil)
	}
	var body []byte
	if resp != nil {
		body = resp.Body
	}
	if int64(len(body)) > c.s.maxBody {
		err = fmt.Errorf("%w: %s returned a body of %d bytes > %d", ErrInternal, c.req.Method, len(body), c.s.maxBody)
		return c.fw.write(typeError, c.id, codeInternal, []byte(err.Error()), nil)
	}
	return c.fw.write(typeResponse, c.id, "", result, body)
}
