package fusefs

import (
	"context"
	"path"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"poolfs/internal/meta"
)

// openFlags are the FOPEN flags of a new handle opened with flags.
//
// O_DIRECT, and every open for writing, bypass the page cache
// (FOPEN_DIRECT_IO) and let the kernel send writes to one file in parallel
// (FOPEN_PARALLEL_DIRECT_WRITES). Without it (FUSE's default, or
// Options.CachedWrites) the kernel copies every write(2) into the page cache
// and then sends it, synchronously, one writer of a file at a time: one
// process writing 1 MiB blocks to a file system that discards them reaches
// about a tenth of what the same process writes with direct I/O. The mount
// keeps its own buffers (client.File), so there is nothing the page cache
// would add for writes. Reads of a descriptor opened read-only still go
// through the page cache and the kernel's readahead, unless
// Options.DirectReads makes them direct too.
//
// A read-only descriptor is FOPEN_NOFLUSH: its close(2) sends no FLUSH
// request (one round trip less for every file a compiler or `cat` reads).
//
// Writable opens go direct only when the kernel can still memory-map such
// files (FUSE_DIRECT_IO_ALLOW_MMAP, Linux 6.6); it then keeps mappings and
// cached pages of other descriptors coherent with the direct writes.
func (fsys *FS) openFlags(flags uint32) uint32 {
	var fl uint32
	readOnly := flags&syscall.O_ACCMODE == syscall.O_RDONLY
	if readOnly {
		// Nothing to flush at close(2): writes are flushed by the close
		// of the descriptor that made them (and locks are the kernel's).
		fl |= fuse.FOPEN_NOFLUSH
	}
	if flags&syscall.O_DIRECT != 0 || (!readOnly && fsys.directWrites.Load()) || (readOnly && fsys.directReads.Load()) {
		fl |= fuse.FOPEN_DIRECT_IO | fuse.FOPEN_PARALLEL_DIRECT_WRITES
	}
	return fl
}

// newHandle makes the handle of an open of of (inode in) with flags, and
// returns it with its FOPEN flags.
func (fsys *FS) newHandle(of *openFile, in *fs.Inode, flags uint32) (*handle, uint32) {
	fl := fsys.openFlags(flags)
	return &handle{fsys: fsys, of: of, in: in, mark: of.f.Mark(), cached: fl&fuse.FOPEN_DIRECT_IO == 0,
		dsync: flags&syscall.O_DSYNC != 0}, fl
}

// mountPath is the node's path from the root of the mount ("/a/b"), one of
// its names if it has several.
func (n *node) mountPath() string { return "/" + n.Path(nil) }

// Open opens a regular file: the shared File of the inode, opened in this
// mount if it was not already.
func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	of, err := n.fsys.acquire(bg(ctx), n.ino, n.mountPath())
	if err != nil {
		return nil, 0, n.fsys.errno("open", err)
	}
	// Close-to-open: if the file changed since this mount last reported
	// it (another mount wrote it), drop the kernel's cached attributes so
	// that reads see the new size. The page cache is dropped at every open
	// because the handle is not FOPEN_KEEP_CACHE.
	if a := of.f.Attr(); a.Size != n.lastSize.Load() || a.Mtime != n.lastMtime.Load() {
		n.NotifyContent(-1, 0)
	}
	h, fl := n.fsys.newHandle(of, &n.Inode, flags)
	return h, fl, 0
}

// Create makes a regular file and opens it.
func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	ch, a, errno := n.create(ctx, name, meta.TypeFile, mode, 0, "", true, out)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	// The create counted one open of the inode; acquire's meta Open claims
	// it, or the failure path gives it back. The File opens from the
	// attributes the create returned.
	ino := a.Ino
	of, err := n.fsys.acquireAttr(bg(ctx), ino, &a, path.Join(n.mountPath(), name))
	if err != nil {
		n.fsys.opens.unclaim(bg(ctx), ino)
		return nil, nil, 0, n.fsys.errno("create", err)
	}
	h, fl := n.fsys.newHandle(of, ch, flags)
	return ch, h, fl, 0
}

// truncate sets the size through the shared File (opening it for the
// call if no handle has it open), which rewrites the last partial stripe.
func (n *node) truncate(ctx context.Context, fh fs.FileHandle, size uint64) syscall.Errno {
	if size > 1<<62 {
		return syscall.EFBIG
	}
	if h, ok := fh.(*handle); ok {
		return n.fsys.errno("truncate", h.file().Truncate(ctx, int64(size)))
	}
	of, err := n.fsys.acquire(ctx, n.ino, n.mountPath())
	if err != nil {
		return n.fsys.errno("truncate", err)
	}
	mark := of.f.Mark()
	err = of.f.Truncate(ctx, int64(size))
	if rerr := n.fsys.release(ctx, of, mark); err == nil {
		err = rerr
	}
	return n.fsys.errno("truncate", err)
}
