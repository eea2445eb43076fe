package fusefs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"poolfs/internal/client"
	"poolfs/internal/fuseuring"
	"poolfs/internal/iostats"
	"poolfs/internal/meta"
)

// Options configure a mount. The zero value (plus a Client) is usable.
type Options struct {
	// AttrTimeout and EntryTimeout are how long the kernel caches
	// attributes and names (default 1 s; negative: 0, no caching).
	AttrTimeout, EntryTimeout time.Duration
	// AllowOther lets users other than the one mounting use the mount
	// (FUSE allow_other; needs root or user_allow_other). Permission bits
	// are checked by the kernel (default_permissions) either way.
	AllowOther bool
	// MaxWrite is the largest write request (default 1 MiB, at most 1 MiB).
	MaxWrite int
	// SessionTTL is the lease of the mount's client session (default
	// DefaultSessionTTL): a killed mount's open files are released on the
	// metadata service this long after it stopped renewing.
	SessionTTL time.Duration
	// Readahead is the kernel's readahead window for the mount (default
	// DefaultReadahead; negative: leave the kernel's 128 KiB). Setting it
	// needs root; without, the mount works with the kernel's window.
	Readahead int
	// CachedWrites sends writes through the kernel's page cache, as FUSE
	// does by default, instead of straight to the mount (see openFlags):
	// small reads of a file open for writing are then served from the
	// cache, but every write is copied into it first and the writers of
	// one file take turns.
	CachedWrites bool
	// DirectReads serves read-only descriptors as O_DIRECT ones are
	// served (FOPEN_DIRECT_IO, Linux 6.6+ so that memory maps still
	// work): no page cache, every read(2) one request answered from the
	// File's stripe read-ahead. Streaming readers that use large reads
	// without asking for O_DIRECT get the device's rate; small reads
	// (4 KiB: a round trip each) are several times slower than from the
	// page cache.
	DirectReads bool
	// URing serves requests from the kernel's per-CPU io_uring queues
	// (FUSE over io_uring, Linux 6.14+; internal/fuseuring) instead of
	// /dev/fuse reads, turning on the fuse module's enable_uring
	// parameter (root). Without kernel support it falls back to /dev/fuse.
	URing bool
	// Stats, if set, counts every request served, per job (jobstats.go):
	// the job of a caller is found by Jobs (nil: every request under the
	// job "").
	Stats *iostats.Recorder
	Jobs  *iostats.JobResolver
	// Debug logs every FUSE request.
	Debug  bool
	Logger *slog.Logger // default: discard
}

// Validate rejects options that cannot work.
func (o *Options) Validate() error {
	if o.SessionTTL < 0 || (o.SessionTTL > 0 && o.SessionTTL < 30*time.Millisecond) {
		return fmt.Errorf("fusefs: SessionTTL %v: want at least 30ms", o.SessionTTL)
	}
	if o.MaxWrite < 0 || o.MaxWrite > 1<<20 {
		return fmt.Errorf("fusefs: MaxWrite %d: want 4 KiB .. 1 MiB", o.MaxWrite)
	}
	return nil
}

// FS is the state of one mount: the client, and the files open in it.
type FS struct {
	c     *client.Client
	m     client.Meta // opens over c.Meta()
	opens *opens
	calls mountCalls // nil if the metadata service lacks them
	log   *slog.Logger
	opts  Options
	// directWrites is set once the kernel agreed to memory-map files
	// opened FOPEN_DIRECT_IO (see openFlags).
	directWrites atomic.Bool
	// directReads: read-only opens too (Options.DirectReads), set with
	// directWrites' condition.
	directReads atomic.Bool

	mu struct {
		sync.Mutex
		files map[meta.Ino]*openFile // inodes open in this mount
	}
}

// Server is a mounted file system.
type Server struct {
	dir  string
	srv  *fuse.Server
	fs   *FS
	ring *fuseuring.Transport // nil: requests come over /dev/fuse
}

// Mount mounts the file system of c on dir and serves it in the background
// until Unmount (or an external umount). dir must be an existing directory.
func Mount(dir string, c *client.Client, o Options) (*Server, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if st, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("fusefs: mount point: %w", err)
	} else if !st.IsDir() {
		return nil, fmt.Errorf("fusefs: mount point %s is not a directory", dir)
	}
	if o.AttrTimeout == 0 {
		o.AttrTimeout = time.Second
	}
	if o.EntryTimeout == 0 {
		o.EntryTimeout = time.Second
	}
	o.AttrTimeout, o.EntryTimeout = max(o.AttrTimeout, 0), max(o.EntryTimeout, 0)
	if o.MaxWrite == 0 {
		o.MaxWrite = 1 << 20
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	fsys := &FS{c: c, log: o.Logger, opts: o}
	fsys.opens = newOpens(c.Meta(), o.Logger)
	fsys.m, fsys.calls = fsys.opens, fsys.opens.calls
	fsys.mu.files = map[meta.Ino]*openFile{}
	// Fail early, with a clear message, when the cluster is not there.
	if _, err := fsys.m.Getattr(context.Background(), meta.RootIno); err != nil {
		return nil, fmt.Errorf("fusefs: root of the file system: %w", err)
	}
	if o.SessionTTL == 0 {
		o.SessionTTL = DefaultSessionTTL
	}
	if err := fsys.opens.startSession(dir, o.SessionTTL); err != nil {
		return nil, fmt.Errorf("fusefs: client session: %w", err)
	}
	neg := time.Duration(0)
	fo := &fs.Options{
		MountOptions: fuse.MountOptions{
			AllowOther:         o.AllowOther,
			Options:            []string{"default_permissions"},
			MaxWrite:           o.MaxWrite,
			MaxReadAhead:       o.MaxWrite,
			MaxBackground:      64,
			FsName:             "poolfs",
			Name:               "poolfs",
			DisableReadDirPlus: true, // a lookup per entry is one RPC each
			DisableSplice:      true, // reads return memory, not file descriptors
			// The kernel asks for security.capability before every write
			// (FUSE never marks inodes S_NOSEC), one metadata call per
			// request; answer "none" in go-fuse instead. File capabilities
			// are not honoured on poolfs (as on a nosuid mount).
			IgnoreSecurityLabels: true,
			// Direct I/O of files that are also memory-mapped (Linux
			// 6.6+), and a large direct request split into MaxWrite
			// pieces that are all sent at once.
			// HANDLE_KILLPRIV_V2: set-id bits are cleared here (setattr.go).
			ExtraCapabilities: fuse.CAP_DIRECT_IO_ALLOW_MMAP | fuse.CAP_ASYNC_DIO | fuse.CAP_HANDLE_KILLPRIV_V2,
			DirectMount:       os.Geteuid() == 0,
			Debug:             o.Debug,
		},
		AttrTimeout:     &o.AttrTimeout,
		EntryTimeout:    &o.EntryTimeout,
		NegativeTimeout: &neg,
		NullPermissions: true, // mode 0 means mode 0
		RootStableAttr:  &fs.StableAttr{Ino: uint64(meta.RootIno)},
	}
	root := &node{fsys: fsys, ino: meta.RootIno}
	srv, ring, err := mountServer(dir, root, fo, o)
	if err != nil {
		fsys.opens.stop()
		return nil, fmt.Errorf("fusefs: mount %s: %w", dir, err)
	}
	// fs.Mount returned after INIT: the kernel said what it can.
	if srv.KernelSettings().Flags64()&fuse.CAP_DIRECT_IO_ALLOW_MMAP != 0 {
		fsys.directWrites.Store(!o.CachedWrites)
		fsys.directReads.Store(o.DirectReads)
	}
	if o.Readahead == 0 {
		o.Readahead = DefaultReadahead
	}
	if o.Readahead > 0 {
		if err := SetReadahead(dir, o.Readahead); err != nil {
			o.Logger.Warn("fusefs: sequential reads will be slower", "err", err)
		}
	}
	return &Server{dir: dir, srv: srv, fs: fsys, ring: ring}, nil
}

// Unmount unmounts the file system. If it is busy (a process has a file
// or its working directory there), it detaches it lazily: the kernel finishes
// the unmount when the last user goes, and Unmount waits for open files to
// be released.
func (s *Server) Unmount() error {
	err := s.srv.Unmount()
	if err != nil {
		if lerr := syscall.Unmount(s.dir, syscall.MNT_DETACH); lerr != nil && !errors.Is(lerr, syscall.EINVAL) {
			return fmt.Errorf("fusefs: unmount %s: %v; lazy unmount: %w", s.dir, err, lerr)
		}
	}
	s.srv.Wait()
	s.waitRing()
	s.fs.opens.stop()
	return nil
}

func (s *Server) waitRing() {
	if s.ring != nil {
		s.ring.Wait()
	}
}

// Wait blocks until the file system is unmounted.
func (s *Server) Wait() {
	s.srv.Wait()
	s.waitRing()
	s.fs.opens.stop()
}

// URing reports whether requests come over io_uring (Options.URing took).
func (s *Server) URing() bool { return s.ring != nil }

// Tried returns how many small READs and WRITEs the io_uring queues served
// on their own threads and how many they handed to goroutines because
// they would have waited (zero over /dev/fuse).
func (s *Server) Tried() (inline, handed uint64) {
	if s.ring == nil {
		return 0, 0
	}
	return s.ring.Tried()
}

// Dir returns the mount point.
func (s *Server) Dir() string { return s.dir }

// bg detaches an operation from the FUSE request's cancellation: an
// interrupted syscall must not abandon a stripe commit half way (the Go
// runtime's own SIGURG interrupts requests all the time). Lookups and
// getattrs use it too: a cancelled call closes its RPC connection, and the
// next call pays for a new one (connect and handshake).
func bg(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }

func isEOF(err error) bool { return errors.Is(err, io.EOF) }

// errno logs unexpected errors and converts err at the FUSE boundary.
func (fsys *FS) errno(op string, err error) syscall.Errno {
	e := toErrno(err)
	if e == syscall.EIO {
		fsys.log.Warn("fusefs: I/O error", "op", op, "err", err)
	}
	return e
}
