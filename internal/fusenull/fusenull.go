// Package fusenull is a FUSE file system that stores nothing: writes are
// discarded and reads return zeros. Mounted with the same options as the
// poolfs mount, it measures what FUSE itself costs on a machine — the
// ceiling any FUSE file system can reach there — so that poolfs's figures
// can be given as a ratio of it.
//
// Every regular file created in it has the size of the furthest write and
// reads as zeros.
package fusenull

import (
	"context"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"poolfs/internal/fusefs"
)

// Options choose how files are opened, mirroring the poolfs mount.
type Options struct {
	MaxWrite   int  // largest request (default 1 MiB)
	DirectIO   bool // open files with FOPEN_DIRECT_IO (no page cache)
	ParallelIO bool // with DirectIO: FOPEN_PARALLEL_DIRECT_WRITES
	// Readahead is the kernel readahead window, as the poolfs mount sets
	// it (default fusefs.DefaultReadahead; negative: the kernel's). Set
	// only when running as root.
	Readahead int
}

type root struct {
	fs.Inode
	opts Options
}

type file struct {
	fs.Inode
	opts Options
	mu   sync.Mutex
	size int64
}

var (
	_ fs.NodeCreater   = (*root)(nil)
	_ fs.NodeUnlinker  = (*root)(nil)
	_ fs.NodeOpener    = (*file)(nil)
	_ fs.NodeReader    = (*file)(nil)
	_ fs.NodeWriter    = (*file)(nil)
	_ fs.NodeGetattrer = (*file)(nil)
	_ fs.NodeSetattrer = (*file)(nil)
	_ fs.NodeFsyncer   = (*file)(nil)
)

func (r *root) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	if ch := r.GetChild(name); ch != nil {
		return ch, nil, r.openFlags(), 0
	}
	f := &file{opts: r.opts}
	ch := r.NewPersistentInode(ctx, f, fs.StableAttr{Mode: syscall.S_IFREG})
	r.AddChild(name, ch, true)
	f.fill(&out.Attr)
	return ch, nil, r.openFlags(), 0
}

func (r *root) Unlink(ctx context.Context, name string) syscall.Errno {
	r.RmChild(name)
	return 0
}

func (r *root) openFlags() uint32 {
	var fl uint32
	if r.opts.DirectIO {
		fl |= fuse.FOPEN_DIRECT_IO
		if r.opts.ParallelIO {
			fl |= fuse.FOPEN_PARALLEL_DIRECT_WRITES
		}
	}
	return fl
}

func (f *file) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	return nil, (&root{opts: f.opts}).openFlags(), 0
}

func (f *file) Read(ctx context.Context, fh fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	f.mu.Lock()
	size := f.size
	f.mu.Unlock()
	if off >= size {
		return fuse.ReadResultData(nil), 0
	}
	n := min(int64(len(dest)), size-off)
	clear(dest[:n])
	return fuse.ReadResultData(dest[:n]), 0
}

func (f *file) Write(ctx context.Context, fh fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	f.mu.Lock()
	f.size = max(f.size, off+int64(len(data)))
	f.mu.Unlock()
	return uint32(len(data)), 0
}

func (f *file) fill(a *fuse.Attr) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a.Mode = syscall.S_IFREG | 0o644
	a.Size = uint64(f.size)
	a.Blksize = 1 << 20
	now := time.Now()
	a.SetTimes(&now, &now, &now)
}

func (f *file) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	f.fill(&out.Attr)
	return 0
}

func (f *file) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if sz, ok := in.GetSize(); ok {
		f.mu.Lock()
		f.size = int64(sz)
		f.mu.Unlock()
	}
	f.fill(&out.Attr)
	return 0
}

func (f *file) Fsync(ctx context.Context, fh fs.FileHandle, flags uint32) syscall.Errno { return 0 }

// Mount mounts a null file system at dir. Unmount with the returned
// server's Unmount.
func Mount(dir string, o Options) (*fuse.Server, error) {
	if o.MaxWrite == 0 {
		o.MaxWrite = 1 << 20
	}
	sec := time.Second
	srv, err := fs.Mount(dir, &root{opts: o}, &fs.Options{
		EntryTimeout: &sec,
		AttrTimeout:  &sec,
		MountOptions: fuse.MountOptions{
			FsName:        "poolfs-null",
			Name:          "poolfs-null",
			MaxWrite:      o.MaxWrite,
			MaxReadAhead:  o.MaxWrite,
			MaxBackground: 64, // as the poolfs mount
		},
	})
	if err != nil {
		return nil, err
	}
	if o.Readahead == 0 {
		o.Readahead = fusefs.DefaultReadahead
	}
	if o.Readahead > 0 {
		// Best effort, as in the poolfs mount: it needs root.
		_ = fusefs.SetReadahead(dir, o.Readahead)
	}
	return srv, nil
}

// MountLoopback mounts backing (a local directory, ideally on tmpfs) at dir
// through go-fuse's loopback file system, with the options of the poolfs
// mount that shape metadata operations (default_permissions, 1 s entry and
// attribute timeouts, no negative entries, no READDIRPLUS). It is the
// metadata ceiling of FUSE on a machine: what a create, stat or remove
// costs through the kernel and go-fuse when the file system behind answers
// at local speed.
func MountLoopback(dir, backing string) (*fuse.Server, error) {
	root, err := fs.NewLoopbackRoot(backing)
	if err != nil {
		return nil, err
	}
	sec, neg := time.Second, time.Duration(0)
	return fs.Mount(dir, root, &fs.Options{
		EntryTimeout:    &sec,
		AttrTimeout:     &sec,
		NegativeTimeout: &neg,
		MountOptions: fuse.MountOptions{
			FsName:             "poolfs-loopback",
			Name:               "poolfs-loopback",
			Options:            []string{"default_permissions"},
			MaxWrite:           1 << 20,
			MaxBackground:      64,
			DisableReadDirPlus: true,
		},
	})
}
