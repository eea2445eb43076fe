package rpc

import (
	"time"

	"golang.org/x/sys/unix"
)

// peekAfter is how long a connection must have sat idle before alive
// bothers to check it: a connection used a moment ago is very likely fine,
// and a hot connection should not pay a system call per call.
const peekAfter = time.Millisecond

// peekState is the scratch space of alive.
type peekState struct {
	fn  func(fd uintptr) bool // cc.peekFD, bound once: no allocation per check
	buf [1]byte
	ok  bool
}

// alive reports whether an idle connection is still open: the server has
// neither hung up nor sent anything unasked. It costs one non-blocking
// recv(MSG_PEEK), and saves the first call after a server restart from
// failing on a dead pooled connection.
func (cc *clientConn) alive() bool {
	if cc.fr.br.Buffered() > 0 {
		return false
	}
	if cc.raw == nil || time.Since(cc.idleSince) < peekAfter {
		return true
	}
	if cc.peek.fn == nil {
		cc.peek.fn = cc.peekFD
	}
	if err := cc.raw.Read(cc.peek.fn); err != nil {
		return false
	}
	return cc.peek.ok
}

// peekFD is the raw-connection callback of alive: only "would block" means
// the connection is open and quiet.
func (cc *clientConn) peekFD(fd uintptr) bool {
	_, _, err := unix.Recvfrom(int(fd), cc.peek.buf[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
	cc.peek.ok = err == unix.EAGAIN || err == unix.EWOULDBLOCK
	return true
}
