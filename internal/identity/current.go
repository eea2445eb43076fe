package identity

import "sync/atomic"

// Current is a node's identity as it is now: renewal replaces the
// certificate while connections are being made with it. It is safe for
// concurrent use; a nil *Current holds no identity.
type Current struct {
	p atomic.Pointer[Identity]
}

// NewCurrent returns a Current holding id (which may be nil).
func NewCurrent(id *Identity) *Current {
	c := &Current{}
	c.p.Store(id)
	return c
}

// Get returns the identity held now, or nil. The caller must not modify
// it.
func (c *Current) Get() *Identity {
	if c == nil {
		return nil
	}
	return c.p.Load()
}

// Set replaces the identity held: connections made from now on present
// id.
func (c *Current) Set(id *Identity) { c.p.Store(id) }
