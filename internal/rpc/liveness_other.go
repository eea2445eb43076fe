//go:build !linux

package rpc

// peekState is empty: this platform has no cheap non-blocking peek.
type peekState struct{}

// alive reports whether an idle connection may be reused. Without a cheap
// non-blocking peek, only unexpected buffered data disqualifies it.
func (cc *clientConn) alive() bool {
	_ = cc.peek
	return cc.fr.br.Buffered() == 0
}
