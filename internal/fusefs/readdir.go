package fusefs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"poolfs/internal/meta"
)

// readdirPage is how many entries one Readdir call to the metadata
// service returns.
const readdirPage = 2048

var _ fs.NodeOpendirHandler = (*node)(nil)

// dirHandle streams a directory page by page. Position i of the listing
// is "." (0), ".." (1), then the entries by name; the offset the kernel
// gets with position i is i+1, where the next listing call resumes.
type dirHandle struct {
	n    *node
	pos  uint64        // position of the next entry
	page []meta.Dirent // entries at positions [at, at+len(page))
	at   uint64        // position of page[0]
	last string        // name of the last entry of page ("" before the first)
	eof  bool          // the metadata service has no entries after page
}

// firstEntry is the position of the first entry after "." and "..".
const firstEntry = 2

var (
	_ fs.FileReaddirenter = (*dirHandle)(nil)
	_ fs.FileSeekdirer    = (*dirHandle)(nil)
	_ fs.FileReleasedirer = (*dirHandle)(nil)
	_ fs.FileFsyncdirer   = (*dirHandle)(nil)
)

// OpendirHandle opens a directory for reading.
func (n *node) OpendirHandle(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	return &dirHandle{n: n, at: firstEntry}, 0, 0
}

// Readdirent returns the next entry, or nil at the end.
func (d *dirHandle) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	switch d.pos {
	case 0:
		d.pos = 1
		return &fuse.DirEntry{Name: ".", Mode: syscall.S_IFDIR, Ino: uint64(d.n.ino), Off: 1}, 0
	case 1:
		d.pos = firstEntry
		ino := uint64(d.n.ino)
		if _, p := d.n.Parent(); p != nil {
			ino = p.StableAttr().Ino
		}
		return &fuse.DirEntry{Name: "..", Mode: syscall.S_IFDIR, Ino: ino, Off: 2}, 0
	}
	for d.pos >= d.at+uint64(len(d.page)) {
		if d.eof {
			return nil, 0
		}
		page, err := d.n.fsys.m.Readdir(ctx, d.n.ino, d.last, readdirPage)
		if err != nil {
			return nil, d.n.fsys.errno("readdir", err)
		}
		d.at += uint64(len(d.page))
		d.page = page
		d.eof = len(page) < readdirPage
		if len(page) > 0 {
			d.last = page[len(page)-1].Name
		}
	}
	e := d.page[d.pos-d.at]
	d.pos++
	return &fuse.DirEntry{Name: e.Name, Ino: uint64(e.Ino), Mode: fileMode(e.Type, 0), Off: d.pos}, 0
}

// Seekdir moves to offset off (0: rewind), re-reading pages as needed.
func (d *dirHandle) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	if off < d.at {
		// Before the current page: start again from the first page.
		d.page, d.at, d.last, d.eof = nil, firstEntry, "", false
	}
	d.pos = off
	return 0
}

// Releasedir forgets the listing.
func (d *dirHandle) Releasedir(ctx context.Context, flags uint32) {}

// Fsyncdir makes every namespace change committed so far durable (the
// metadata service may defer durability until asked, as POSIX allows).
func (d *dirHandle) Fsyncdir(ctx context.Context, flags uint32) syscall.Errno {
	return d.n.fsys.errno("fsyncdir", d.n.fsys.c.Sync(bg(ctx)))
}
