package fusefs

import (
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"poolfs/internal/iostats"
)

// statsFS counts every request the mount serves in Options.Stats, under
// the job of the calling process (Options.Jobs; FUSE gives its pid): reads
// and writes with their bytes, and the metadata requests. Latency is the
// time the file system took to answer, as the mount sees it. A READ or
// WRITE tried on an io_uring queue's thread that answered EAGAIN is not
// counted: it is served again, and counted, on a goroutine.
type statsFS struct {
	fuse.RawFileSystem
	rec  *iostats.Recorder
	jobs *iostats.JobResolver
}

func (s statsFS) record(cancel <-chan struct{}, h *fuse.InHeader, c iostats.Class, n int, st fuse.Status, start time.Time) {
	if st == fuse.Status(syscall.EAGAIN) && cancel == (<-chan struct{})(tryCancel) {
		return
	}
	var job string
	if s.jobs != nil {
		job = s.jobs.Job(h.Pid, h.Uid)
	}
	s.rec.Record(job, c, n, time.Since(start))
}

func (s statsFS) meta(cancel <-chan struct{}, h *fuse.InHeader, start time.Time, st fuse.Status) fuse.Status {
	s.record(cancel, h, iostats.Meta, 0, st, start)
	return st
}

func (s statsFS) Read(cancel <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	start := time.Now()
	r, st := s.RawFileSystem.Read(cancel, in, buf)
	n := 0
	if st.Ok() && r != nil {
		n = r.Size()
	}
	s.record(cancel, &in.InHeader, iostats.Read, n, st, start)
	return r, st
}

func (s statsFS) Write(cancel <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	start := time.Now()
	n, st := s.RawFileSystem.Write(cancel, in, data)
	s.record(cancel, &in.InHeader, iostats.Write, int(n), st, start)
	return n, st
}

func (s statsFS) Writev(cancel <-chan struct{}, in *fuse.WriteIn, data [][]byte) (uint32, fuse.Status) {
	start := time.Now()
	n, st := s.RawFileSystem.Writev(cancel, in, data)
	s.record(cancel, &in.InHeader, iostats.Write, int(n), st, start)
	return n, st
}

func (s statsFS) Lookup(cancel <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	start := time.Now()
	return s.meta(cancel, h, start, s.RawFileSystem.Lookup(cancel, h, name, out))
}

func (s statsFS) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	start := time.Now()
	return s.meta(cancel, &in.InHeader, start, s.RawFileSystem.GetAttr(cancel, in, out))
}

func (s statsFS) SetAttr(cancel <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	start := time.Now()
	return s.meta(cancel, &in.InHeader, start, s.RawFileSystem.SetAttr(cancel, in, out))
}

func (s statsFS) Mknod(cancel <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	start := time.Now()
	return s.meta(cancel, &in.InHeader, start, s.RawFileSystem.Mknod(cancel, in, name, out))
}

func (s statsFS) Mkdir(cancel <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	start := time.Now()
	return s.meta(cancel, &in.InHeader, start, s.RawFileSystem.Mkdir(cancel, in, name, out))
}

func (s statsFS) Unlink(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	start := time.Now()
	return s.meta(cancel, h, start, s.RawFileSystem.Unlink(cancel, h, name))
}

func (s statsFS) Rmdir(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	start := time.Now()
	return s.meta(cancel, h, start, s.RawFileSystem.Rmdir(cancel, h, name))
}

func (s statsFS) Rename(cancel <-chan struct{}, in *fuse.RenameIn, oldName, newName string) fuse.Status {
	start := time.Now()
	return s.meta(cancel, &in.InHeader, start, s.RawFileSystem.Rename(cancel, in, oldName, newName))
}

func (s statsFS) Link(cancel <-chan struct{}, in *fuse.LinkIn, name string, out *fuse.EntryOut) fuse.Status {
	start := time.Now()
	return s.meta(cancel, &in.InHeader, start, s.RawFileSystem.Link(cancel, in, name, out))
}

func (s statsFS) Symlink(cancel <-chan struct{}, h *fuse.InHeader, target, name string, out *fuse.EntryOut) fuse.Status {
	start := time.Now()
	return s.meta(cancel, h, start, s.RawFileSystem.Symlink(cancel, h, target, name, out))
}

func (s statsFS) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	start := time.Now()
	return s.meta(cancel, &in.InHeader, start, s.RawFileSystem.Create(cancel, in, name, out))
}

func (s statsFS) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	start := time.Now()
	return s.meta(cancel, &in.InHeader, start, s.RawFileSystem.Open(cancel, in, out))
}

func (s statsFS) Flush(cancel <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	start := time.Now()
	return s.meta(cancel, &in.InHeader, start, s.RawFileSystem.Flush(cancel, in))
}

func (s statsFS) Fsync(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	start := time.Now()
	return s.meta(cancel, &in.InHeader, start, s.RawFileSystem.Fsync(cancel, in))
}

func (s statsFS) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	start := time.Now()
	return s.meta(cancel, &in.InHeader, start, s.RawFileSystem.OpenDir(cancel, in, out))
}

func (s statsFS) ReadDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	start := time.Now()
	return s.meta(cancel, &in.InHeader, start, s.RawFileSystem.ReadDir(cancel, in, out))
}

func (s statsFS) StatFs(cancel <-chan struct{}, h *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	start := time.Now()
	return s.meta(cancel, h, start, s.RawFileSystem.StatFs(cancel, h, out))
}

func (s statsFS) Fallocate(cancel <-chan struct{}, in *fuse.FallocateIn) fuse.Status {
	start := time.Now()
	return s.meta(cancel, &in.InHeader, start, s.RawFileSystem.Fallocate(cancel, in))
}
