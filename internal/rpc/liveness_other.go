//go:build !linux

package rpc

// alive reports whether an idle connection may be reused. Without a cheap
// non-blocking peek, only unexpected buffered data disqualifies it.
func (cc *clientConn) alive() bool {
	return cc.fr.br.Buffered() == 0
}
