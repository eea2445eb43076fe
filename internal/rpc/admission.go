package rpc

import (
	"container/list"
	"errors"
	"fmt"
	"net"
	"time"
)

// Admission: what a connection may cost before and after it authenticates.
// A connection that has not authenticated holds a goroutine, a socket and
// a few hundred bytes of arrays on the goroutine's stack, for at most
// HandshakeTimeout; at most MaxPending such connections are kept, and when
// another arrives the oldest is closed. Keeping the newest rather than
// refusing it means a client that completes its handshake in one round
// trip gets through a flood of connections that stall, unless the flood
// opens MaxPending connections within that round trip. Authenticated
// connections, which hold their read buffers, are bounded by MaxConns.

// Defaults of ServerOptions.
const (
	DefaultMaxPending       = 1024
	DefaultHandshakeTimeout = 5 * time.Second
	DefaultMaxConns         = 8192
)

// ServerStats counts a Server's connections.
type ServerStats struct {
	Pending int    // connections in the handshake now
	Conns   int    // authenticated connections open now
	Evicted uint64 // connections closed unauthenticated to make room under MaxPending
	Refused uint64 // authenticated connections refused at MaxConns
}

// Stats returns the server's connection counts.
func (s *Server) Stats() ServerStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return ServerStats{Pending: s.mu.pending.Len(), Conns: s.mu.authed, Evicted: s.mu.evicted, Refused: s.mu.refused}
}

// pendingConn is a connection in its handshake, an element of s.mu.pending.
type pendingConn struct {
	nc      net.Conn
	evicted bool // closed to make room; guarded by s.mu
}

// addPendingLocked records a new connection as pending, first closing the
// oldest pending one if the table is full.
func (s *Server) addPendingLocked(nc net.Conn) *list.Element {
	if s.mu.pending.Len() >= s.maxPending {
		old := s.mu.pending.Remove(s.mu.pending.Front()).(*pendingConn)
		old.evicted = true
		old.nc.Close() // its handshake fails and its goroutine ends
		s.mu.evicted++
		if n := s.mu.evicted; n&(n-1) == 0 { // 1, 2, 4, ...: visible, but no log flood
			s.log.Warn("rpc: too many unauthenticated connections, closing the oldest",
				"max_pending", s.maxPending, "evicted_total", n, "remote", old.nc.RemoteAddr())
		}
	}
	return s.mu.pending.PushBack(&pendingConn{nc: nc})
}

var (
	errEvicted = errors.New("rpc: connection closed unauthenticated to make room for newer ones")
	errBusy    = errors.New("server at its connection limit")
)

// admit is called once a pending connection's client has proved the
// secret: it leaves the pending table and takes an authenticated slot, or
// is refused. The caller calls release when an admitted connection ends.
func (s *Server) admit(el *list.Element) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if el.Value.(*pendingConn).evicted {
		return errEvicted
	}
	s.mu.pending.Remove(el)
	if s.mu.authed >= s.maxConns {
		s.mu.refused++
		return fmt.Errorf("%w (%d)", errBusy, s.maxConns)
	}
	s.mu.authed++
	return nil
}

// endConn forgets a connection that is closing: pending or, if admitted,
// authenticated.
func (s *Server) endConn(nc net.Conn, el *list.Element, admitted bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.mu.conns, nc)
	delete(s.mu.peers, nc)
	s.mu.pending.Remove(el) // no-op if it left the table already
	if admitted {
		s.mu.authed--
	}
}
