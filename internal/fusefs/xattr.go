package fusefs

import (
	"context"
	"strings"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"

	"poolfs/internal/meta"
)

var (
	_ fs.NodeGetxattrer    = (*node)(nil)
	_ fs.NodeSetxattrer    = (*node)(nil)
	_ fs.NodeListxattrer   = (*node)(nil)
	_ fs.NodeRemovexattrer = (*node)(nil)
)

// xattrSupported reports whether the name space of an attribute name is
// one poolfs stores. system.* (ACLs) is not supported, as on a file system
// mounted without ACL support. The kernel already checked the caller's
// right to the name space (trusted.* needs CAP_SYS_ADMIN, user.* only on
// files and directories).
func xattrSupported(name string) bool {
	for _, p := range []string{"user.", "trusted.", "security."} {
		if strings.HasPrefix(name, p) && len(name) > len(p) {
			return true
		}
	}
	return false
}

// Getxattr copies the value into dest, or returns its size when dest is
// empty; ERANGE when dest is too small.
func (n *node) Getxattr(ctx context.Context, name string, dest []byte) (uint32, syscall.Errno) {
	if !xattrSupported(name) {
		return 0, syscall.EOPNOTSUPP
	}
	v, err := n.fsys.m.GetXattr(ctx, n.ino, name)
	if err != nil {
		return 0, n.fsys.errno("getxattr", err)
	}
	if len(dest) == 0 {
		return uint32(len(v)), 0
	}
	if len(v) > len(dest) {
		return uint32(len(v)), syscall.ERANGE
	}
	return uint32(copy(dest, v)), 0
}

// Setxattr sets a value with XATTR_CREATE / XATTR_REPLACE semantics.
func (n *node) Setxattr(ctx context.Context, name string, data []byte, flags uint32) syscall.Errno {
	if !xattrSupported(name) {
		return syscall.EOPNOTSUPP
	}
	if len(data) > meta.MaxXattrValue {
		return syscall.E2BIG
	}
	n.dirAttr.drop()
	defer n.dirAttr.drop()
	err := n.fsys.m.SetXattr(bg(ctx), n.ino, name, data, meta.XattrFlags(flags))
	if err != nil {
		if toErrno(err) == syscall.EINVAL && flags <= 2 {
			return syscall.ENOSPC // too many names for one listxattr buffer
		}
		return n.fsys.errno("setxattr", err)
	}
	return 0
}

// Listxattr copies the NUL-terminated names into dest, or returns their
// size when dest is empty; ERANGE when dest is too small.
func (n *node) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	names, err := n.fsys.m.ListXattr(ctx, n.ino)
	if err != nil {
		return 0, n.fsys.errno("listxattr", err)
	}
	var b []byte
	for _, s := range names {
		b = append(append(b, s...), 0)
	}
	if len(dest) == 0 {
		return uint32(len(b)), 0
	}
	if len(b) > len(dest) {
		return uint32(len(b)), syscall.ERANGE
	}
	return uint32(copy(dest, b)), 0
}

// Removexattr deletes an attribute; ENODATA if it does not exist.
func (n *node) Removexattr(ctx context.Context, name string) syscall.Errno {
	if !xattrSupported(name) {
		return syscall.EOPNOTSUPP
	}
	n.dirAttr.drop()
	defer n.dirAttr.drop()
	return n.fsys.errno("removexattr", n.fsys.m.RemoveXattr(bg(ctx), n.ino, name))
}
