package rpc

import (
	"time"

	"golang.org/x/sys/unix"
)

// peekAfter is how long a connection must have sat idle before alive
// bothers to check it: a connection used a moment ago is very likely fine,
// and a hot connection should not pay a system call per call.
const peekAfter = time.Millisecond

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
	if cc.peekFn == nil {
		cc.peekFn = cc.peek // bound once: no allocation per check
	}
	if err := cc.raw.Read(cc.peekFn); err != nil {
		return false
	}
	return cc.peekOK
}

// peek is the raw-connection callback of alive: only "would block" means
// the connection is open and quiet.
func (cc *clientConn) peek(fd uintptr) bool {
	_, _, err := unix.Recvfrom(int(fd), cc.peekBuf[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
	cc.peekOK = err == unix.EAGAIN || err == unix.EWOULDBLOCK
	return true
}
