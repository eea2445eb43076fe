package fusefs

import (
	"context"
	"sync/atomic"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"poolfs/internal/meta"
)

// node is one inode of the mount. Its attributes are not cached here (the
// kernel caches them); node remembers only what it last reported, to tell
// when another mount changed the file (Open) and what a child inherits.
type node struct {
	fs.Inode
	fsys *FS
	ino  meta.Ino

	lastSize  atomic.Uint64 // size last reported to the kernel
	lastMtime atomic.Int64
	setgid    atomic.Bool   // directory with S_ISGID: children take its gid
	gid       atomic.Uint32 // the directory's gid

	// dirAttr holds a directory's attributes as a create or unlink in it
	// returned them (dirattr.go), so that the GETATTR the kernel sends
	// after each such change needs no round trip.
	dirAttr dirAttrCache
}

var (
	_ fs.NodeLookuper   = (*node)(nil)
	_ fs.NodeGetattrer  = (*node)(nil)
	_ fs.NodeSetattrer  = (*node)(nil)
	_ fs.NodeOpener     = (*node)(nil)
	_ fs.NodeCreater    = (*node)(nil)
	_ fs.NodeMkdirer    = (*node)(nil)
	_ fs.NodeMknoder    = (*node)(nil)
	_ fs.NodeSymlinker  = (*node)(nil)
	_ fs.NodeReadlinker = (*node)(nil)
	_ fs.NodeLinker     = (*node)(nil)
	_ fs.NodeUnlinker   = (*node)(nil)
	_ fs.NodeRmdirer    = (*node)(nil)
	_ fs.NodeRenamer    = (*node)(nil)
	_ fs.NodeStatfser   = (*node)(nil)
)

// fileMode converts a meta type and permission bits to st_mode.
func fileMode(t meta.FileType, perm uint32) uint32 {
	m := perm & meta.PermMask
	switch t {
	case meta.TypeDir:
		return m | syscall.S_IFDIR
	case meta.TypeSymlink:
		return m | syscall.S_IFLNK
	case meta.TypeFIFO:
		return m | syscall.S_IFIFO
	case meta.TypeSocket:
		return m | syscall.S_IFSOCK
	case meta.TypeChar:
		return m | syscall.S_IFCHR
	case meta.TypeBlock:
		return m | syscall.S_IFBLK
	}
	return m | syscall.S_IFREG
}

// fileType is the meta type of an st_mode; ok is false for unknown types.
func fileType(mode uint32) (meta.FileType, bool) {
	switch mode & syscall.S_IFMT {
	case syscall.S_IFREG, 0:
		return meta.TypeFile, true
	case syscall.S_IFDIR:
		return meta.TypeDir, true
	case syscall.S_IFLNK:
		return meta.TypeSymlink, true
	case syscall.S_IFIFO:
		return meta.TypeFIFO, true
	case syscall.S_IFSOCK:
		return meta.TypeSocket, true
	case syscall.S_IFCHR:
		return meta.TypeChar, true
	case syscall.S_IFBLK:
		return meta.TypeBlock, true
	}
	return 0, false
}

// fillAttr converts a to out, with the size of this mount's open File if
// the inode is open here, and remembers what it reported.
func (n *node) fillAttr(a meta.Attr, out *fuse.Attr) {
	used := a.Size
	if a.Type == meta.TypeFile {
		// st_blocks: the data bytes of the stored stripes (meta.Attr.Stored),
		// plus what this mount buffers beyond the committed size.
		used = a.Stored
		if sz, ok := n.fsys.openSize(a.Ino); ok {
			if sz > a.Size {
				used += sz - a.Size
			}
			a.Size = sz
		}
	}
	out.Ino = uint64(a.Ino)
	out.Size = a.Size
	out.Blocks = (used + 511) / 512
	out.Blksize = 1 << 20
	out.Mode = fileMode(a.Type, a.Mode)
	out.Nlink = a.Nlink
	out.Uid, out.Gid = a.Uid, a.Gid
	out.Rdev = a.Rdev
	out.Atime, out.Atimensec = uint64(a.Atime/1e9), uint32(a.Atime%1e9)
	out.Mtime, out.Mtimensec = uint64(a.Mtime/1e9), uint32(a.Mtime%1e9)
	out.Ctime, out.Ctimensec = uint64(a.Ctime/1e9), uint32(a.Ctime%1e9)
	n.lastSize.Store(a.Size)
	n.lastMtime.Store(a.Mtime)
	if a.Type == meta.TypeDir {
		n.setgid.Store(a.Mode&syscall.S_ISGID != 0)
		n.gid.Store(a.Gid)
	}
}

// child returns the Inode of a, creating its node if the kernel does not
// know it yet (a hard link reuses the existing one), and fills out.
func (n *node) child(ctx context.Context, a meta.Attr, out *fuse.EntryOut) *fs.Inode {
	ch := n.NewInode(ctx, &node{fsys: n.fsys, ino: a.Ino},
		fs.StableAttr{Mode: fileMode(a.Type, 0), Ino: uint64(a.Ino)})
	ch.Operations().(*node).fillAttr(a, &out.Attr)
	return ch
}

// Lookup resolves name in directory n.
func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	a, err := n.fsys.m.Lookup(bg(ctx), n.ino, name)
	if err != nil {
		return nil, n.fsys.errno("lookup", err)
	}
	return n.child(ctx, a, out), 0
}

// Getattr returns fresh attributes from the metadata service, or those a
// change of this directory made in this mount returned, if they are
// younger than the attribute timeout.
func (n *node) Getattr(ctx context.Context, _ fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if a, ok := n.dirAttr.get(); ok {
		n.fillAttr(a, &out.Attr)
		return 0
	}
	a, err := n.fsys.m.Getattr(bg(ctx), n.ino)
	if err != nil {
		return n.fsys.errno("getattr", err)
	}
	n.fillAttr(a, &out.Attr)
	return 0
}

// caller returns the uid and gid that own what the request creates: the
// caller's, with the gid of a setgid parent directory.
func (n *node) caller(ctx context.Context) (uid, gid uint32) {
	if c, ok := fuse.FromContext(ctx); ok {
		uid, gid = c.Uid, c.Gid
	}
	if n.setgid.Load() {
		gid = n.gid.Load()
	}
	return uid, gid
}

// create makes a child of any type; with open (regular files only), the
// metadata service counts one open of it (see opens).
func (n *node) create(ctx context.Context, name string, typ meta.FileType, mode, rdev uint32, target string, open bool, out *fuse.EntryOut) (*fs.Inode, meta.Attr, syscall.Errno) {
	uid, gid := n.caller(ctx)
	perm := mode & meta.PermMask
	if typ == meta.TypeDir && n.setgid.Load() {
		perm |= syscall.S_ISGID
	}
	var a meta.Attr
	var err error
	if c := n.fsys.calls; c != nil {
		var pa meta.Attr
		a, pa, err = c.CreateAttr(bg(ctx), meta.CreateArgs{Parent: n.ino, Name: name, Type: typ,
			Mode: perm, Uid: uid, Gid: gid, Rdev: rdev, Target: target, Open: open})
		if err == nil {
			n.dirAttr.set(pa, n.fsys.opts.AttrTimeout)
			if open {
				n.fsys.opens.noteOpened(a.Ino)
			}
		}
	} else {
		// Without CreateAttr, the open is acquire's plain meta Open.
		n.dirAttr.drop()
		a, err = n.fsys.m.Create(bg(ctx), n.ino, name, typ, perm, uid, gid, rdev, target)
	}
	if err != nil {
		return nil, a, n.fsys.errno("create", err)
	}
	return n.child(ctx, a, out), a, 0
}

// Mkdir makes a directory.
func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ch, _, errno := n.create(ctx, name, meta.TypeDir, mode, 0, "", false, out)
	return ch, errno
}

// Mknod makes a regular file, fifo, socket or device node.
func (n *node) Mknod(ctx context.Context, name string, mode, dev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	typ, ok := fileType(mode)
	if !ok || typ == meta.TypeDir || typ == meta.TypeSymlink {
		return nil, syscall.EINVAL
	}
	ch, _, errno := n.create(ctx, name, typ, mode, dev, "", false, out)
	return ch, errno
}

// Symlink makes a symbolic link to target.
func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if len(target) > meta.MaxTargetLen {
		return nil, syscall.ENAMETOOLONG
	}
	ch, _, errno := n.create(ctx, name, meta.TypeSymlink, 0o777, 0, target, false, out)
	return ch, errno
}

// Readlink returns a symlink's target.
func (n *node) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	a, err := n.fsys.m.Getattr(ctx, n.ino)
	if err != nil {
		return nil, n.fsys.errno("readlink", err)
	}
	if a.Type != meta.TypeSymlink {
		return nil, syscall.EINVAL
	}
	return []byte(a.Target), 0
}

// Link makes name in n a hard link to target.
func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	t, ok := target.(*node)
	if !ok {
		return nil, syscall.EXDEV
	}
	n.dirAttr.drop()
	defer n.dirAttr.drop() // and any set by a change that raced with this one
	a, err := n.fsys.m.Link(bg(ctx), t.ino, n.ino, name)
	if err != nil {
		return nil, n.fsys.errno("link", err)
	}
	return n.child(ctx, a, out), 0
}

// Unlink removes a non-directory; an inode open in any mount lives on
// until its last release there.
func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	c := n.fsys.calls
	if c == nil {
		n.dirAttr.drop()
		return n.fsys.errno("unlink", n.fsys.m.Unlink(bg(ctx), n.ino, name))
	}
	pa, err := c.UnlinkAttr(bg(ctx), n.ino, name)
	if err != nil {
		n.dirAttr.drop()
		return n.fsys.errno("unlink", err)
	}
	n.dirAttr.set(pa, n.fsys.opts.AttrTimeout)
	return 0
}

// Rmdir removes an empty directory.
func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	n.dirAttr.drop()
	defer n.dirAttr.drop()
	return n.fsys.errno("rmdir", n.fsys.m.Rmdir(bg(ctx), n.ino, name))
}

// Linux renameat2 flags.
const (
	renameNoReplace = 1
	renameExchange  = 2
)

// Rename is renameat2(2) with RENAME_NOREPLACE and RENAME_EXCHANGE.
func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	np, ok := newParent.(*node)
	if !ok {
		return syscall.EXDEV
	}
	var mf meta.RenameFlags
	switch flags {
	case 0:
	case renameNoReplace:
		mf = meta.RenameNoReplace
	case renameExchange:
		mf = meta.RenameExchange
	default:
		return syscall.EINVAL // RENAME_WHITEOUT, or both
	}
	n.dirAttr.drop()
	np.dirAttr.drop()
	defer n.dirAttr.drop()
	defer np.dirAttr.drop()
	return n.fsys.errno("rename", n.fsys.m.Rename(bg(ctx), n.ino, name, np.ino, newName, mf))
}

// Statfs reports the usable capacity of the root directory's pool (raw
// bytes times k/(k+m)) and the inode count.
func (n *node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	root, err := n.fsys.m.Getattr(ctx, meta.RootIno)
	if err != nil {
		return n.fsys.errno("statfs", err)
	}
	used, limit, err := n.fsys.m.PoolUsage(ctx, root.Layout.Pool)
	if err != nil {
		return n.fsys.errno("statfs", err)
	}
	inodes, err := n.fsys.m.Statfs(ctx)
	if err != nil {
		return n.fsys.errno("statfs", err)
	}
	const bsize = 4096
	if limit == 0 {
		limit = 1 << 60 // no limit set
	}
	usable := func(raw uint64) uint64 {
		l := root.Layout
		if l.Width() == 0 {
			return raw / bsize
		}
		return raw / uint64(l.Width()) * uint64(l.K) / bsize
	}
	free := uint64(0)
	if used < limit {
		free = limit - used
	}
	out.Bsize, out.Frsize = bsize, bsize
	out.Blocks = usable(limit)
	out.Bfree = usable(free)
	out.Bavail = out.Bfree
	const freeInodes = 1 << 40 // inode numbers are 64-bit and never run out
	out.Files = inodes + freeInodes
	out.Ffree = freeInodes
	out.NameLen = meta.MaxNameLen
	return 0
}
