package fusefs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"poolfs/internal/client"
	"poolfs/internal/meta"
)

// Setattr is chmod, chown, utimens and truncate. On an inode open in this
// mount the change goes through its File, so that times set explicitly
// survive the flush of writes buffered before them (client.File.Setattr).
//
// Set-id bits: the mount asks for FUSE_HANDLE_KILLPRIV_V2, so the kernel
// leaves clearing them to the file system and marks what must clear them:
// FATTR_KILL_SUIDGID on a truncate by a caller without CAP_FSETID and on
// every chown of a non-directory (meta.SetKillSuidGid), and
// FUSE_WRITE_KILL_SUIDGID on a write by such a caller, which killPrivFS
// turns into a SETATTR of FATTR_KILL_SUIDGID alone before the write.
func (n *node) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if h, ok := fh.(*handle); ok && in.Valid&^(fuse.FATTR_FH|fuse.FATTR_LOCKOWNER) == fuse.FATTR_KILL_SUIDGID {
		return n.killOnWrite(ctx, h, out)
	}
	ctx = bg(ctx)
	n.dirAttr.drop()
	defer n.dirAttr.drop()
	if size, ok := in.GetSize(); ok {
		if errno := n.truncate(ctx, fh, size); errno != 0 {
			return errno
		}
	}
	sa := setAttrOf(in)
	f := n.openFile(fh)
	var a meta.Attr
	var err error
	switch {
	case sa.Valid == 0:
		a, err = n.fsys.m.Getattr(ctx, n.ino)
	case f != nil:
		a, err = f.Setattr(ctx, sa)
	default:
		a, err = n.fsys.m.Setattr(ctx, n.ino, sa)
	}
	if err != nil {
		return n.fsys.errno("setattr", err)
	}
	n.fillAttr(a, &out.Attr)
	return 0
}

// setAttrOf translates a SETATTR request, except its size.
func setAttrOf(in *fuse.SetAttrIn) meta.SetAttr {
	var sa meta.SetAttr
	if m, ok := in.GetMode(); ok {
		sa.Valid |= meta.SetMode
		sa.Mode = m & meta.PermMask
	}
	if uid, ok := in.GetUID(); ok {
		sa.Valid |= meta.SetUid
		sa.Uid = uid
	}
	if gid, ok := in.GetGID(); ok {
		sa.Valid |= meta.SetGid
		sa.Gid = gid
	}
	if in.Valid&fuse.FATTR_ATIME != 0 {
		if in.Valid&fuse.FATTR_ATIME_NOW != 0 {
			sa.Valid |= meta.SetAtimeNow
		} else {
			sa.Valid |= meta.SetAtime
			sa.Atime = int64(in.Atime)*1e9 + int64(in.Atimensec)
		}
	}
	if in.Valid&fuse.FATTR_MTIME != 0 {
		if in.Valid&fuse.FATTR_MTIME_NOW != 0 {
			sa.Valid |= meta.SetMtimeNow
		} else {
			sa.Valid |= meta.SetMtime
			sa.Mtime = int64(in.Mtime)*1e9 + int64(in.Mtimensec)
		}
	}
	if in.Valid&fuse.FATTR_KILL_SUIDGID != 0 {
		sa.Valid |= meta.SetKillSuidGid
	}
	return sa
}

// openFile returns the File of n if it is open in this mount (through fh,
// or another handle), else nil.
func (n *node) openFile(fh fs.FileHandle) *client.File {
	if h, ok := fh.(*handle); ok {
		return h.file()
	}
	n.fsys.mu.Lock()
	defer n.fsys.mu.Unlock()
	if of := n.fsys.mu.files[n.ino]; of != nil {
		return of.f
	}
	return nil
}

// killOnWrite clears the set-id bits before a write by a caller without
// CAP_FSETID; on an ordinary file it costs no call. The kernel keeps the
// attributes it has cached, so they are invalidated when the mode changed.
// A request tried inline answers EAGAIN where it would wait, and fills no
// attributes (killPrivFS does not send them; filling takes the File's
// mutex).
func (n *node) killOnWrite(ctx context.Context, h *handle, out *fuse.AttrOut) syscall.Errno {
	f := h.file()
	try := trying(ctx)
	changed, err := f.KillSuidGid(bg(ctx), try)
	if err != nil {
		return n.fsys.errno("write", err)
	}
	if changed {
		n.NotifyContent(-1, 0)
	}
	if !try {
		n.fillAttr(f.Attr(), &out.Attr)
	}
	return 0
}

// killPrivFS is the file system as the kernel sees it: a WRITE marked
// FUSE_WRITE_KILL_SUIDGID first clears the set-id bits (a SETATTR of
// FATTR_KILL_SUIDGID on the same handle; node.Setattr), as the kernel
// does before a write through the page cache without
// FUSE_HANDLE_KILLPRIV_V2. go-fuse's node API does not pass write flags
// to the handler, hence the request of its own.
type killPrivFS struct{ fuse.RawFileSystem }

func (k killPrivFS) kill(cancel <-chan struct{}, in *fuse.WriteIn) fuse.Status {
	if in.WriteFlags&fuse.WRITE_KILL_SUIDGID == 0 {
		return fuse.OK
	}
	sa := fuse.SetAttrIn{SetAttrInCommon: fuse.SetAttrInCommon{InHeader: in.InHeader,
		Valid: fuse.FATTR_KILL_SUIDGID | fuse.FATTR_FH, Fh: in.Fh}}
	var out fuse.AttrOut
	return k.RawFileSystem.SetAttr(cancel, &sa, &out)
}

func (k killPrivFS) Write(cancel <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	if st := k.kill(cancel, in); !st.Ok() {
		return 0, st
	}
	return k.RawFileSystem.Write(cancel, in, data)
}

func (k killPrivFS) Writev(cancel <-chan struct{}, in *fuse.WriteIn, data [][]byte) (uint32, fuse.Status) {
	if st := k.kill(cancel, in); !st.Ok() {
		return 0, st
	}
	return k.RawFileSystem.Writev(cancel, in, data)
}
