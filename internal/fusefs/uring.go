package fusefs

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"poolfs/internal/fuseuring"
)

// mountMu serialises mounts in this process while one of them looks for
// the /dev/fuse descriptor go-fuse opened (go-fuse does not expose it).
var mountMu sync.Mutex

// devFuseFDs returns this process's descriptors open on /dev/fuse.
func devFuseFDs() map[int]bool {
	out := map[int]bool{}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return out
	}
	for _, e := range ents {
		if t, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && t == "/dev/fuse" {
			if fd, err := strconv.Atoi(e.Name()); err == nil {
				out[fd] = true
			}
		}
	}
	return out
}

// mountServer mounts root on dir as fs.Mount does and, with o.URing,
// moves the connection's requests to the kernel's per-CPU io_uring queues
// (fuseuring) once INIT has negotiated them. It returns the transport, or
// nil when requests stay on /dev/fuse (o.URing unset, or the kernel
// without FUSE over io_uring, which is logged).
func mountServer(dir string, root fs.InodeEmbedder, fo *fs.Options, o Options) (*fuse.Server, *fuseuring.Transport, error) {
	var rawFS fuse.RawFileSystem = killPrivFS{fs.NewNodeFS(root, fo)}
	if o.Stats != nil {
		rawFS = statsFS{RawFileSystem: rawFS, rec: o.Stats, jobs: o.Jobs}
	}
	if o.URing {
		if err := fuseuring.Enable(); err != nil {
			o.Logger.Warn("fusefs: FUSE over io_uring is off; serving /dev/fuse", "err", err)
			o.URing = false
		}
	}
	if !o.URing {
		srv, err := fuse.NewServer(rawFS, dir, &fo.MountOptions)
		if err != nil {
			return nil, nil, err
		}
		return srv, nil, serve(srv)
	}
	fo.MountOptions.ExtraCapabilities |= fuse.CAP_OVER_IO_URING
	mountMu.Lock()
	before := devFuseFDs()
	srv, err := fuse.NewServer(rawFS, dir, &fo.MountOptions) // mounts and answers INIT
	var fresh []int
	for f := range devFuseFDs() {
		if !before[f] {
			fresh = append(fresh, f)
		}
	}
	mountMu.Unlock()
	if err != nil {
		return nil, nil, err
	}
	if srv.KernelSettings().Flags64()&fuse.CAP_OVER_IO_URING == 0 {
		o.Logger.Warn("fusefs: the kernel did not offer FUSE over io_uring; serving /dev/fuse")
		return srv, nil, serve(srv)
	}
	// INIT accepted io_uring: the kernel holds every request until each
	// CPU's queue has an entry, so the queues come before waiting for the
	// mount. FORGETs and INTERRUPTs still come over /dev/fuse.
	go srv.Serve()
	t, err := startRing(fresh, rawFS, fo, srv, o)
	if err != nil {
		_ = srv.Unmount()
		return nil, nil, err
	}
	return srv, t, srv.WaitMount()
}

// startRing starts the transport on the mount's /dev/fuse descriptor, the
// one descriptor on /dev/fuse that appeared while mounting (fresh).
func startRing(fresh []int, rawFS fuse.RawFileSystem, fo *fs.Options, srv *fuse.Server, o Options) (*fuseuring.Transport, error) {
	if len(fresh) != 1 {
		return nil, fmt.Errorf("fusefs: io_uring: %d descriptors on /dev/fuse appeared while mounting, want the mount's one (use --uring=false)", len(fresh))
	}
	fd := fresh[0]
	ps := fuse.NewProtocolServer(rawFS, &fo.MountOptions)
	try := fuse.NewProtocolServer(tryFS{rawFS}, &fo.MountOptions)
	for _, p := range []*fuse.ProtocolServer{ps, try} {
		if err := fuseuring.Init(p, srv.KernelSettings()); err != nil {
			return nil, err
		}
	}
	return fuseuring.Start(fd, ps, fuseuring.Options{PayloadSize: max(o.MaxWrite, 8192), Try: try, Logger: o.Logger})
}

// tryCancel marks the READs and WRITEs that the io_uring transport tries
// on a queue's thread (fuseuring.Options.Try): their handlers find it as
// their context's Done channel (it is never closed) and answer EAGAIN,
// having changed nothing, instead of waiting (client.File.TryReadAt,
// TryWriteAtFor).
var tryCancel = make(chan struct{})

// trying reports whether a handler serves a request tried inline.
func trying(ctx context.Context) bool { return ctx.Done() == (<-chan struct{})(tryCancel) }

// tryFS is the file system as the transport's Try server sees it: READ
// and WRITE carry tryCancel.
type tryFS struct{ fuse.RawFileSystem }

func (t tryFS) Read(_ <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	return t.RawFileSystem.Read(tryCancel, in, buf)
}

func (t tryFS) Write(_ <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	return t.RawFileSystem.Write(tryCancel, in, data)
}

// serve runs srv's /dev/fuse loop and waits until the mount is visible.
func serve(srv *fuse.Server) error {
	go srv.Serve()
	return srv.WaitMount()
}
