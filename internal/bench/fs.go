package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"poolfs/internal/client"
	"poolfs/internal/cluster"
	"poolfs/internal/meta"
)

// APIs a benchmark can drive.
const (
	APIPosix  = "posix"  // os.File I/O on a directory (a poolfs mount or any FS)
	APIPoolfs = "poolfs" // the poolfs client library, through a cluster directory
)

// Target says where a benchmark does its I/O.
type Target struct {
	API string `json:"api"` // APIPosix or APIPoolfs
	// Dir is the directory the benchmark works in: a local path for posix,
	// a path inside the poolfs namespace for poolfs (default /bench). A
	// posix directory must exist: OpenFS does not create it.
	Dir string `json:"dir"`
	// Cluster is the cluster directory for the poolfs API.
	Cluster string `json:"cluster,omitempty"`
	// Direct opens files with O_DIRECT (posix only), so reads and writes
	// bypass the page cache; the I/O buffers must then be aligned
	// (erasure.AlignedBuffer) and sizes and offsets multiples of
	// erasure.Align.
	Direct bool `json:"direct,omitempty"`
}

// Validate rejects a target that cannot be opened.
func (t Target) Validate() error {
	switch t.API {
	case APIPosix:
		if t.Dir == "" {
			return fmt.Errorf("%w: the posix API needs --dir", ErrUsage)
		}
	case APIPoolfs:
		if t.Cluster == "" {
			return fmt.Errorf("%w: the poolfs API needs a cluster directory (-c)", ErrUsage)
		}
	default:
		return fmt.Errorf("%w: api %q: want %s or %s", ErrUsage, t.API, APIPosix, APIPoolfs)
	}
	if t.Direct && t.API != APIPosix {
		return fmt.Errorf("%w: --direct (O_DIRECT) needs the posix API", ErrUsage)
	}
	return nil
}

// FS is the file system surface the benchmarks use. Names are relative,
// slash-separated paths below the target directory.
type FS interface {
	// Create opens name for writing, creating it if absent; with excl an
	// existing file is an error. It never truncates.
	Create(ctx context.Context, name string, excl bool) (File, error)
	// Open opens an existing file for reading.
	Open(ctx context.Context, name string) (File, error)
	// Stat returns the size of a file (or directory).
	Stat(ctx context.Context, name string) (int64, error)
	Mkdir(ctx context.Context, name string) error
	MkdirAll(ctx context.Context, name string) error
	// Remove removes a file; Rmdir an empty directory.
	Remove(ctx context.Context, name string) error
	Rmdir(ctx context.Context, name string) error
	RemoveAll(ctx context.Context, name string) error
	Close() error
}

// File is an open benchmark file.
type File interface {
	ReadAt(ctx context.Context, p []byte, off int64) (int, error)
	WriteAt(ctx context.Context, p []byte, off int64) (int, error)
	// Sync makes the written data durable (fsync).
	Sync(ctx context.Context) error
	Close(ctx context.Context) error
}

// OpenFS opens the target's file system. The caller closes it.
func OpenFS(ctx context.Context, t Target) (FS, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	if t.API == APIPosix {
		// Never created here: a missing directory (a mount that is not
		// there, a typo) would measure whatever disk holds its parent.
		st, err := os.Stat(t.Dir)
		switch {
		case errors.Is(err, os.ErrNotExist):
			return nil, fmt.Errorf("%w: --dir %s does not exist: create it on the file system to measure (it is not created, so that a missing mount is not measured as the local disk)", ErrUsage, t.Dir)
		case err != nil:
			return nil, fmt.Errorf("bench: %w", err)
		case !st.IsDir():
			return nil, fmt.Errorf("%w: --dir %s is not a directory", ErrUsage, t.Dir)
		}
		return posixFS{root: t.Dir, direct: t.Direct}, nil
	}
	conn, err := cluster.Connect(ctx, t.Cluster, client.Options{})
	if err != nil {
		return nil, err
	}
	root := t.Dir
	if root == "" {
		root = "/bench"
	}
	if err := conn.Client.Mkdir(ctx, root, 0o755, true); err != nil {
		conn.Close()
		return nil, fmt.Errorf("bench: mkdir %s: %w", root, err)
	}
	return &poolFS{conn: conn, root: path.Clean("/" + root), dirs: map[string]meta.Ino{}}, nil
}

// posixFS is plain os calls on a directory; with direct, files are
// opened O_DIRECT.
type posixFS struct {
	root   string
	direct bool
}

// flags adds O_DIRECT to flag if p.direct.
func (p posixFS) flags(flag int) int {
	if p.direct {
		flag |= syscall.O_DIRECT
	}
	return flag
}

func (p posixFS) path(name string) string { return filepath.Join(p.root, filepath.FromSlash(name)) }

func (p posixFS) Create(_ context.Context, name string, excl bool) (File, error) {
	flag := os.O_RDWR | os.O_CREATE
	if excl {
		flag |= os.O_EXCL
	}
	f, err := os.OpenFile(p.path(name), p.flags(flag), 0o644)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (p posixFS) Open(_ context.Context, name string) (File, error) {
	f, err := os.OpenFile(p.path(name), p.flags(os.O_RDONLY), 0)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (p posixFS) Stat(_ context.Context, name string) (int64, error) {
	fi, err := os.Stat(p.path(name))
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

func (p posixFS) Mkdir(_ context.Context, name string) error { return os.Mkdir(p.path(name), 0o755) }
func (p posixFS) MkdirAll(_ context.Context, name string) error {
	return os.MkdirAll(p.path(name), 0o755)
}
func (p posixFS) Remove(_ context.Context, name string) error    { return os.Remove(p.path(name)) }
func (p posixFS) Rmdir(_ context.Context, name string) error     { return os.Remove(p.path(name)) }
func (p posixFS) RemoveAll(_ context.Context, name string) error { return os.RemoveAll(p.path(name)) }
func (p posixFS) Close() error                                   { return nil }

type osFile struct{ f *os.File }

func (o osFile) ReadAt(_ context.Context, p []byte, off int64) (int, error) {
	return o.f.ReadAt(p, off)
}
func (o osFile) WriteAt(_ context.Context, p []byte, off int64) (int, error) {
	return o.f.WriteAt(p, off)
}
func (o osFile) Sync(context.Context) error  { return o.f.Sync() }
func (o osFile) Close(context.Context) error { return o.f.Close() }

// poolFS drives the poolfs client library. Directory inodes are cached, as
// the kernel's dentry cache would for a mount.
type poolFS struct {
	conn *cluster.Conn
	root string

	mu   sync.Mutex // guards dirs
	dirs map[string]meta.Ino
}

func (p *poolFS) abs(name string) string { return path.Join(p.root, name) }

// parent returns the inode of name's directory and name's last element.
func (p *poolFS) parent(ctx context.Context, name string) (meta.Ino, string, error) {
	full := p.abs(name)
	dir, base := path.Split(full)
	dir = path.Clean(dir)
	p.mu.Lock()
	ino, ok := p.dirs[dir]
	p.mu.Unlock()
	if ok {
		return ino, base, nil
	}
	a, err := p.conn.Client.Resolve(ctx, dir)
	if err != nil {
		return 0, "", err
	}
	p.mu.Lock()
	p.dirs[dir] = a.Ino
	p.mu.Unlock()
	return a.Ino, base, nil
}

// dirCacher is an FS that caches directory lookups; forget drops name
// and everything below it, after another task removed them.
type dirCacher interface{ forget(name string) }

var _ dirCacher = (*poolFS)(nil)

func (p *poolFS) forget(name string) {
	full := p.abs(name)
	p.mu.Lock()
	for d := range p.dirs {
		if d == full || strings.HasPrefix(d, full+"/") {
			delete(p.dirs, d)
		}
	}
	p.mu.Unlock()
}

// attrCreator is a metadata service that creates and returns the new
// inode's and its parent's attributes in one call (meta.Store.CreateAttr,
// metarpc.Client.CreateAttr), as a mount's creates do.
type attrCreator interface {
	CreateAttr(ctx context.Context, in meta.CreateArgs) (child, parent meta.Attr, err error)
}

func (p *poolFS) Create(ctx context.Context, name string, excl bool) (File, error) {
	dir, base, err := p.parent(ctx, name)
	if err != nil {
		return nil, err
	}
	m := p.conn.Client.Meta()
	var a meta.Attr
	if ca, ok := m.(attrCreator); ok { // as a mount creates: one binary call
		a, _, err = ca.CreateAttr(ctx, meta.CreateArgs{Parent: dir, Name: base, Type: meta.TypeFile,
			Mode: 0o644, Uid: uint32(os.Getuid()), Gid: uint32(os.Getgid())})
	} else {
		a, err = m.Create(ctx, dir, base, meta.TypeFile, 0o644, uint32(os.Getuid()), uint32(os.Getgid()), 0, "")
	}
	if errors.Is(err, meta.ErrExist) && !excl {
		a, err = m.Lookup(ctx, dir, base)
	}
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", name, err)
	}
	// The create (or lookup) returned the current attributes: the handle
	// needs no Getattr.
	f, err := p.conn.Client.OpenAttr(a, p.abs(name))
	if err != nil {
		return nil, err
	}
	return poolFile{f}, nil
}

func (p *poolFS) Open(ctx context.Context, name string) (File, error) {
	dir, base, err := p.parent(ctx, name)
	if err != nil {
		return nil, err
	}
	a, err := p.conn.Client.Meta().Lookup(ctx, dir, base)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", name, err)
	}
	f, err := p.conn.Client.Open(ctx, a.Ino, p.abs(name))
	if err != nil {
		return nil, err
	}
	return poolFile{f}, nil
}

func (p *poolFS) Stat(ctx context.Context, name string) (int64, error) {
	dir, base, err := p.parent(ctx, name)
	if err != nil {
		return 0, err
	}
	a, err := p.conn.Client.Meta().Lookup(ctx, dir, base)
	if err != nil {
		return 0, fmt.Errorf("stat %s: %w", name, err)
	}
	return int64(a.Size), nil
}

func (p *poolFS) Mkdir(ctx context.Context, name string) error {
	dir, base, err := p.parent(ctx, name)
	if err != nil {
		return err
	}
	a, err := p.conn.Client.Meta().Create(ctx, dir, base, meta.TypeDir, 0o755, uint32(os.Getuid()), uint32(os.Getgid()), 0, "")
	if err != nil {
		return fmt.Errorf("mkdir %s: %w", name, err)
	}
	p.mu.Lock()
	p.dirs[p.abs(name)] = a.Ino
	p.mu.Unlock()
	return nil
}

func (p *poolFS) MkdirAll(ctx context.Context, name string) error {
	return p.conn.Client.Mkdir(ctx, p.abs(name), 0o755, true)
}

func (p *poolFS) Remove(ctx context.Context, name string) error {
	dir, base, err := p.parent(ctx, name)
	if err != nil {
		return err
	}
	if err := p.conn.Client.Meta().Unlink(ctx, dir, base); err != nil {
		return fmt.Errorf("remove %s: %w", name, err)
	}
	return nil
}

func (p *poolFS) Rmdir(ctx context.Context, name string) error {
	dir, base, err := p.parent(ctx, name)
	if err != nil {
		return err
	}
	p.forget(name)
	if err := p.conn.Client.Meta().Rmdir(ctx, dir, base); err != nil {
		return fmt.Errorf("rmdir %s: %w", name, err)
	}
	return nil
}

func (p *poolFS) RemoveAll(ctx context.Context, name string) error {
	p.forget(name)
	err := p.conn.Client.RemoveAll(ctx, p.abs(name))
	if errors.Is(err, meta.ErrNotFound) {
		return nil
	}
	return err
}

func (p *poolFS) Close() error { return p.conn.Close() }

// poolFile is a client.File; Close flushes (the data is visible), Sync
// makes it durable, and Close lets go of the File's cache.
type poolFile struct{ f *client.File }

func (p poolFile) ReadAt(ctx context.Context, b []byte, off int64) (int, error) {
	n, err := p.f.ReadAt(ctx, b, off)
	if err == io.EOF && n == len(b) {
		err = nil
	}
	return n, err
}
func (p poolFile) WriteAt(ctx context.Context, b []byte, off int64) (int, error) {
	return p.f.WriteAt(ctx, b, off)
}
func (p poolFile) Sync(ctx context.Context) error { return p.f.Sync(ctx) }
func (p poolFile) Close(ctx context.Context) error {
	err := p.f.Flush(ctx)
	p.f.Close()
	return err
}

// isNotFound reports a missing file from either API.
func isNotFound(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, meta.ErrNotFound)
}
