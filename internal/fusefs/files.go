package fusefs

import (
	"context"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"poolfs/internal/client"
	"poolfs/internal/meta"
)

// openFile is the one client.File of an inode open in this mount, shared
// by all its handles.
type openFile struct {
	ino meta.Ino
	// pins counts handles and opens in progress; guarded by FS.mu. The
	// entry leaves FS.mu.files when it drops to zero.
	pins int
	// life serialises opening and closing f, so that a new open waits for
	// the last release's flush and then sees the committed data.
	life sync.Mutex
	// f is nil while the inode is not open; set under life and FS.mu.
	f *client.File
	// db drops the page cache behind sequential readers (dropbehind.go).
	db dropBehind
}

// acquire returns the shared file of ino, opening it (client File and meta
// Open) if no handle of this mount has it open. Every successful acquire is
// balanced by one release.
// name is the file's path in the mount, for the File's errors (a data
// loss names it).
func (fsys *FS) acquire(ctx context.Context, ino meta.Ino, name string) (*openFile, error) {
	return fsys.acquireAttr(ctx, ino, nil, name)
}

// acquireAttr is acquire that, if a is not nil, opens the File from the
// attributes a (of ino, just returned by the metadata service: a create)
// instead of reading them again.
func (fsys *FS) acquireAttr(ctx context.Context, ino meta.Ino, a *meta.Attr, name string) (*openFile, error) {
	fsys.mu.Lock()
	of := fsys.mu.files[ino]
	if of == nil {
		of = &openFile{ino: ino}
		fsys.mu.files[ino] = of
	}
	of.pins++
	fsys.mu.Unlock()

	of.life.Lock()
	defer of.life.Unlock()
	if of.f != nil {
		if a == nil {
			// Open again while open: close-to-open (client.File.Revalidate).
			if err := of.f.Revalidate(ctx); err != nil {
				fsys.mu.Lock()
				of.pins--
				fsys.dropLocked(of)
				fsys.mu.Unlock()
				return nil, err
			}
		}
		return of, nil
	}
	var f *client.File
	var err error
	if a != nil {
		f, err = fsys.c.OpenAttr(*a, name)
	} else {
		f, err = fsys.c.Open(ctx, ino, name)
	}
	if err == nil {
		if err = fsys.m.Open(ctx, ino); err != nil {
			f = nil
		}
	}
	if err != nil {
		fsys.mu.Lock()
		of.pins--
		fsys.dropLocked(of)
		fsys.mu.Unlock()
		return nil, err
	}
	fsys.mu.Lock()
	of.f = f
	fsys.mu.Unlock()
	return of, nil
}

// release drops one pin of of. The last one flushes the file and calls
// meta Release (which destroys an unlinked inode); the flush reports lost
// writes as the holder of mark (taken when the pin was) has not heard of.
func (fsys *FS) release(ctx context.Context, of *openFile, mark *client.ErrMark) error {
	of.life.Lock()
	fsys.mu.Lock()
	of.pins--
	last := of.pins == 0
	f := of.f
	fsys.mu.Unlock()
	var err error
	if last && f != nil {
		err = f.FlushFor(ctx, mark)
		if err != nil {
			// The handle goes: what it could not write is lost (close
			// reports it), and the pool space its buffers held is given
			// back now, not when the garbage collector finds the File (a
			// file written into a full pool, then removed, kept its
			// share, and the next file found the pool full).
			f.Discard()
		}
		if rerr := fsys.m.Release(ctx, of.ino); err == nil {
			err = rerr
		}
		f.Close()
		fsys.mu.Lock()
		of.f = nil
		fsys.mu.Unlock()
	}
	of.life.Unlock()
	fsys.mu.Lock()
	fsys.dropLocked(of)
	fsys.mu.Unlock()
	return err
}

// dropLocked removes of from the table if nothing pins it. FS.mu is held.
func (fsys *FS) dropLocked(of *openFile) {
	if of.pins == 0 && fsys.mu.files[of.ino] == of {
		delete(fsys.mu.files, of.ino)
	}
}

// openSize returns the size of ino as this mount's open File sees it
// (including unflushed writes), if ino is open here.
func (fsys *FS) openSize(ino meta.Ino) (uint64, bool) {
	fsys.mu.Lock()
	of := fsys.mu.files[ino]
	var f *client.File
	if of != nil {
		f = of.f
	}
	fsys.mu.Unlock()
	if f == nil {
		return 0, false
	}
	return f.Attr().Size, true
}

// handle is one open file description of a regular file.
type handle struct {
	fsys *FS
	of   *openFile
	in   *fs.Inode
	// mark is how far this open file description has heard of the
	// File's lost background writes: every description open when one is
	// lost hears of it once, at its next write, close or fsync (as with
	// Linux's errseq_t), however many descriptions share the File.
	mark *client.ErrMark
	// cached: the kernel reads this handle through the page cache
	// (openFlags gave it no FOPEN_DIRECT_IO).
	cached bool
	// dsync: opened O_SYNC or O_DSYNC, every write is synced.
	dsync bool
}

var (
	_ fs.FileReader   = (*handle)(nil)
	_ fs.FileWriter   = (*handle)(nil)
	_ fs.FileFlusher  = (*handle)(nil)
	_ fs.FileFsyncer  = (*handle)(nil)
	_ fs.FileReleaser = (*handle)(nil)
)

func (h *handle) file() *client.File {
	h.fsys.mu.Lock()
	defer h.fsys.mu.Unlock()
	return h.of.f
}

// Read reads from the shared File; holes read as zeros.
// A request tried inline (trying) answers EAGAIN where it would wait.
func (h *handle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	f := h.file()
	read := f.ReadAt
	if trying(ctx) {
		read = f.TryReadAt
	}
	n, err := read(bg(ctx), dest, off)
	if err != nil && !isEOF(err) {
		// Not the bytes before the failed part as a short reply: the
		// kernel takes a short READ for the end of the file, and the
		// reader would see a shorter file instead of the error.
		return nil, h.fsys.errno("read", err)
	}
	if h.cached && n > 0 {
		h.of.db.read(h.in, off, n)
	}
	return fuse.ReadResultData(dest[:n]), 0
}

// Write buffers data in the shared File; full stripes are written back as
// they fill, the rest at flush. A request tried inline (trying) answers
// EAGAIN where it would wait.
func (h *handle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	f := h.file()
	write := f.WriteAtFor
	if trying(ctx) {
		write = f.TryWriteAtFor
	}
	n, err := write(bg(ctx), h.mark, data, off)
	if err == nil && h.dsync {
		// O_SYNC, O_DSYNC: durable before write(2) returns.
		err = f.SyncFor(bg(ctx), h.mark)
	}
	if err != nil {
		return uint32(n), h.fsys.errno("write", err)
	}
	return uint32(n), 0
}

// Flush runs at every close(2) of a descriptor of this handle: the data
// is committed and visible to every client that opens the file after
// close returns, not yet durable (Fsync).
func (h *handle) Flush(ctx context.Context) syscall.Errno {
	return h.fsys.errno("flush", h.file().FlushFor(bg(ctx), h.mark))
}

// Fsync (and fdatasync) make the data durable: flush, then the client's
// Sync (its deferred fragments, then the metadata service), which also
// makes the file's create and any other metadata change durable, even
// when there was no data to flush.
func (h *handle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	return h.fsys.errno("fsync", h.file().SyncFor(bg(ctx), h.mark))
}

// Release is the last close of the handle.
func (h *handle) Release(ctx context.Context) syscall.Errno {
	return h.fsys.errno("release", h.fsys.release(bg(ctx), h.of, h.mark))
}
