package rpc

import (
	"errors"
	"fmt"
	"time"

	"poolfs/internal/identity"
)

// Rechecking live connections. A certificate is verified in full at the
// handshake, but a connection may live for days: a peer revoked (or whose
// certificate expired) since must not keep it. So a side that trusts a CA
// (Peers set) checks its connections' peer certificates again with
// identity.Trust.Recheck (expiry and the revocation list, no signature):
//
//   - before every call: a server refuses the call of a peer no longer
//     accepted with ErrAuth naming why, then closes the connection; a
//     client closes an idle connection to such a server instead of using
//     it and dials again (a revoked server then refuses that dial);
//   - every RecheckEvery (default DefaultRecheckEvery), on connections in
//     use as well: a server closes those of revoked or expired clients
//     (their handlers' contexts are cancelled); a client closes those to
//     revoked servers, and the call in flight on one fails with an error
//     wrapping ErrUnavailable, ErrAuth and identity.ErrRevoked.
//
// So a revocation takes effect on every connection within RecheckEvery of
// the moment Trust.Revoked starts reporting it.

// DefaultRecheckEvery is the default of ServerOptions.RecheckEvery and
// ClientOptions.RecheckEvery.
const DefaultRecheckEvery = time.Second

// peerRefusedError is a call refused because the caller's certificate is
// no longer accepted; the server closes the connection after answering it.
type peerRefusedError struct{ err error }

func (e *peerRefusedError) Error() string { return e.err.Error() }
func (e *peerRefusedError) Unwrap() error { return e.err }

// recheckPeer returns why the server no longer accepts peer (nil if it
// does, or if the server trusts no CA).
func (s *Server) recheckPeer(peer *identity.Cert) error {
	if s.peers == nil || peer == nil {
		return nil
	}
	if err := s.peers.Recheck(peer); err != nil {
		return &peerRefusedError{fmt.Errorf("%w: %w", ErrAuth, err)}
	}
	return nil
}

// recheckLoop closes, every s.recheckEvery until Close, the connections
// whose peer the server no longer accepts.
func (s *Server) recheckLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.recheckEvery)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
			s.recheck()
		}
	}
}

// recheck closes the connections whose peer's certificate is no longer
// accepted; their readers notice and cancel the handlers' contexts.
func (s *Server) recheck() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for nc, peer := range s.mu.peers {
		if err := s.peers.Recheck(peer); err != nil {
			s.log.Warn("rpc: closing the connection of a peer no longer accepted", "remote", nc.RemoteAddr(), "err", err)
			nc.Close()
			delete(s.mu.peers, nc)
		}
	}
}

// recheckLoop checks, every c.recheckEvery until Close, the peers of the
// client's connections (recheck).
func (c *Client) recheckLoop(stop <-chan struct{}) {
	t := time.NewTicker(c.recheckEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			c.recheck()
		}
	}
}

// recheck closes idle connections whose server is no longer accepted
// (revoked or expired) and connections in use to a revoked server,
// marking them so that their call fails with the reason.
func (c *Client) recheck() {
	c.mu.Lock()
	defer c.mu.Unlock()
	keep := c.mu.idle[:0]
	for _, cc := range c.mu.idle {
		if c.stale(cc) != nil || cc.own != c.identity.Get() {
			cc.nc.Close()
			continue
		}
		keep = append(keep, cc)
	}
	clear(c.mu.idle[len(keep):])
	c.mu.idle = keep
	for cc := range c.mu.busy {
		if err := c.stale(cc); errors.Is(err, identity.ErrRevoked) && cc.refused == nil {
			cc.refused = err
			cc.nc.Close() // the call in flight fails; call reports cc.refused
		}
	}
}

// stale returns why the client no longer accepts the server of cc (nil
// if it does, or if the client trusts no CA). Errors wrap
// ErrUnavailable and ErrAuth: the server is out of the cluster, and
// callers that go around unreachable servers should go around it.
func (c *Client) stale(cc *clientConn) error {
	if c.peers == nil || cc.peer == nil {
		return nil
	}
	if err := c.peers.Recheck(cc.peer); err != nil {
		return fmt.Errorf("%w: %w: server %s no longer accepted: %w", ErrUnavailable, ErrAuth, c.addr, err)
	}
	return nil
}
