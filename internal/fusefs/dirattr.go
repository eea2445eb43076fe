package fusefs

import (
	"sync"
	"time"

	"poolfs/internal/meta"
)

// dirAttrCache holds the attributes of a directory that the metadata
// service returned with a create or unlink in it.
//
// The kernel invalidates a directory's attributes after every create and
// unlink in it and, because permissions are checked by the kernel
// (default_permissions), asks for them again (GETATTR) before the next
// lookup in that directory: one extra round trip per create and unlink.
// The transaction that made the change returned the directory's new
// attributes, so the answer is already known. They are served for at most
// the attribute timeout after they were read, which is no staler than
// what the kernel itself caches; every other change of the directory in
// this mount (rename, link, rmdir, setattr, xattrs) drops them, before
// and after the call (a create that raced with it may have set them).
type dirAttrCache struct {
	mu struct {
		sync.Mutex
		a     meta.Attr
		until time.Time // zero: empty
	}
}

// set stores a for ttl, unless the cache holds newer attributes (a
// concurrent change in the same directory that returned later).
func (c *dirAttrCache) set(a meta.Attr, ttl time.Duration) {
	if ttl <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.mu.until.IsZero() && c.mu.a.Ctime > a.Ctime {
		return
	}
	c.mu.a, c.mu.until = a, time.Now().Add(ttl)
}

// get returns the cached attributes if they are still valid.
func (c *dirAttrCache) get() (meta.Attr, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.until.IsZero() {
		return meta.Attr{}, false
	}
	if time.Now().After(c.mu.until) {
		c.mu.until = time.Time{}
		return meta.Attr{}, false
	}
	return c.mu.a, true
}

// drop empties the cache.
func (c *dirAttrCache) drop() {
	c.mu.Lock()
	c.mu.until = time.Time{}
	c.mu.Unlock()
}
