package chunkstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"poolfs/internal/erasure"

	"poolfs/internal/privfile"
)

// fileDrive is the files format: one file per fragment (see doc.go). The
// caller (LocalDrive) holds the directory lock.
type fileDrive struct {
	dir      string
	capacity int64 // 0: from the file system
	log      *slog.Logger
	syncer   *dirSyncer
	bufs     bufPool
	direct   atomic.Bool   // O_DIRECT in use; cleared once on fallback
	used     atomic.Int64  // bytes of fragments, including reserved writes
	frags    atomic.Int64  // fragments
	tmpSeq   atomic.Uint64 // unique temp names
	keyLocks [64]sync.Mutex
	closed   atomic.Bool
	failed   sticky         // the drive's directory tree lost a part
	deferred deferredWrites // counted deferred writes; Sync covers them
	// open opens fragment files: unix.Open, replaced in tests to emulate
	// file systems without O_DIRECT.
	open func(path string, flags int, mode uint32) (int, error)
}

// openFiles opens (creating if needed) a files-format drive in dir, whose
// lock the caller holds: it removes temp files left by a crash and
// recomputes usage by scanning the fanout directories in parallel.
func openFiles(dir string, opts Options, log *slog.Logger) (*fileDrive, error) {
	d := &fileDrive{dir: dir, capacity: opts.Capacity, log: log, open: unix.Open}
	d.direct.Store(opts.DirectIO)
	d.syncer = newDirSyncer(dir)
	if err := d.createLayout(); err != nil {
		return nil, err
	}
	if err := d.recover(); err != nil {
		return nil, err
	}
	return d, nil
}

func (d *fileDrive) createLayout() error {
	root := filepath.Join(d.dir, fragsDir)
	if _, err := os.Stat(filepath.Join(root, fanoutName(fanoutDirs-1))); err == nil {
		return nil
	}
	for i := range fanoutDirs {
		if err := os.MkdirAll(filepath.Join(root, fanoutName(i)), dirMode); err != nil {
			return err
		}
	}
	for _, p := range []string{root, d.dir} {
		if err := privfile.Fsync(p); err != nil {
			return err
		}
	}
	return nil
}

// Close makes later calls fail with ErrFailed, after making deferred
// writes durable.
func (d *fileDrive) Close() error {
	if d.closed.Swap(true) {
		return nil
	}
	// Deferred writes become durable at a clean close, as the segments
	// format's seal makes them.
	if err := d.deferred.sync(d.syncFS); err != nil {
		return fmt.Errorf("drive %s: close: syncfs: %w", d.dir, err)
	}
	return nil
}

// DirectIO reports whether fragment I/O currently uses O_DIRECT.
func (d *fileDrive) DirectIO() bool { return d.direct.Load() }

// recordOverhead: a fragment is a file of its own bytes.
func (d *fileDrive) recordOverhead() int64 { return 0 }

func (d *fileDrive) fanoutPath(i int) string {
	return d.dir + "/" + fragsDir + "/" + fanoutName(i)
}

func (d *fileDrive) check(ctx context.Context, op string, key erasure.FragmentKey) error {
	if d.closed.Load() {
		return d.errorf(op, key, fmt.Errorf("%w: closed", ErrFailed))
	}
	if err := ctx.Err(); err != nil {
		return d.errorf(op, key, err)
	}
	return nil
}

// reserve accounts size bytes before writing, or fails with ErrFull.
func (d *fileDrive) reserve(size int64) error { return reserve(d.dir, d.capacity, &d.used, size) }

func (d *fileDrive) keyLock(key erasure.FragmentKey) *sync.Mutex {
	return &d.keyLocks[(key.Ino^key.Stripe*31^key.Gen*17^uint64(key.Index))%uint64(len(d.keyLocks))]
}

// WriteFragment implements Drive: temp file, write (O_DIRECT), fdatasync,
// rename over the final name, group-committed fsync of the directory.
func (d *fileDrive) WriteFragment(ctx context.Context, key erasure.FragmentKey, frag []byte) error {
	if err := d.check(ctx, "write", key); err != nil {
		return err
	}
	if err := checkFragLen(len(frag)); err != nil {
		return d.errorf("write", key, err)
	}
	if err := d.failed.err(); err != nil {
		return d.errorf("write", key, err)
	}
	size := int64(len(frag))
	if err := d.reserve(size); err != nil {
		return d.ioError("write", key, err) // statfs of a vanished directory: failed
	}
	dirIdx := fanout(key)
	dirPath := d.fanoutPath(dirIdx)
	final := dirPath + "/" + fragName(key)
	tmp := dirPath + "/" + tmpPrefix + fragName(key) + "-" + strconv.FormatUint(d.tmpSeq.Add(1), 10)
	deferred := IsDeferred(ctx)
	if err := d.writeFile(tmp, frag, !deferred); err != nil {
		d.used.Add(-size)
		unix.Unlink(tmp)
		return d.ioError("write", key, err)
	}
	mu := d.keyLock(key)
	mu.Lock()
	var old unix.Stat_t
	hadOld := unix.Stat(final, &old) == nil
	if err := unix.Rename(tmp, final); err != nil {
		mu.Unlock()
		d.used.Add(-size)
		unix.Unlink(tmp)
		return d.ioError("write", key, err)
	}
	if hadOld { // keys are never reused; a retried write replaces itself
		d.used.Add(-old.Size)
	} else {
		d.frags.Add(1)
	}
	mu.Unlock()
	if deferred {
		d.deferred.wrote() // durable at the next Sync
		return nil
	}
	if err := d.syncer.commit(dirIdx); err != nil {
		return d.errorf("write", key, fmt.Errorf("%w: fsync directory: %w", ErrFailed, err))
	}
	return nil
}

// writeFile creates path with frag's bytes, durable on return if sync.
func (d *fileDrive) writeFile(path string, frag []byte, sync bool) error {
	const flags = unix.O_WRONLY | unix.O_CREAT | unix.O_EXCL | unix.O_CLOEXEC
	// A small deferred write goes through the page cache (deferred.go).
	direct := d.direct.Load() && (sync || len(frag) > maxCachedFragment)
	for {
		f := flags
		if direct {
			f |= unix.O_DIRECT
		}
		fd, err := d.open(path, f, fileMode)
		if err == nil {
			err = d.writeAndSync(fd, frag, direct, sync)
			if cerr := unix.Close(fd); err == nil {
				err = cerr
			}
		}
		if err != nil && direct && isDirectUnsupported(err) {
			d.fallback(err)
			unix.Unlink(path)
			direct = false
			continue
		}
		return err
	}
}

func (d *fileDrive) writeAndSync(fd int, frag []byte, direct, sync bool) error {
	buf := frag
	if direct && !isAligned(frag) {
		buf = d.bufs.get(len(frag))
		copy(buf, frag)
		defer d.bufs.put(buf)
	}
	if err := pwriteFull(fd, buf, 0); err != nil || !sync {
		return err
	}
	return unix.Fdatasync(fd)
}

// Sync implements Drive: one syncfs(2) of the host file system writes the
// data and the directory entries of every deferred write at once.
func (d *fileDrive) Sync(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d.closed.Load() {
		return fmt.Errorf("drive %s: sync: %w: closed", d.dir, ErrFailed)
	}
	if err := d.failed.err(); err != nil {
		return fmt.Errorf("drive %s: sync: %w", d.dir, err)
	}
	if err := d.deferred.sync(d.syncFS); err != nil {
		d.failed.set(err)
		return fmt.Errorf("drive %s: sync: %w: syncfs: %w", d.dir, ErrFailed, err)
	}
	return nil
}

// syncFS syncs the file system holding the drive.
func (d *fileDrive) syncFS() error {
	fd, err := unix.Open(d.dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Syncfs(fd)
}

func (d *fileDrive) fallback(err error) {
	if d.direct.Swap(false) {
		d.log.Warn("chunkstore: O_DIRECT not supported, falling back to buffered I/O", "err", err)
	}
}

// ReadFragment implements Drive.
func (d *fileDrive) ReadFragment(ctx context.Context, key erasure.FragmentKey, off, n int64, dst []byte) ([]byte, error) {
	if err := d.check(ctx, "read", key); err != nil {
		return nil, err
	}
	if err := checkRange(off, n); err != nil {
		return nil, d.errorf("read", key, err)
	}
	path := d.fanoutPath(fanout(key)) + "/" + fragName(key)
	for {
		direct := d.direct.Load()
		f := unix.O_RDONLY | unix.O_CLOEXEC
		if direct {
			f |= unix.O_DIRECT
		}
		fd, err := d.open(path, f, 0)
		if errors.Is(err, unix.ENOENT) {
			if gone := goneError(d.dir, err); gone != nil {
				return nil, d.errorf("read", key, gone)
			}
			return nil, d.errorf("read", key, ErrNotFound)
		}
		var out []byte
		if err == nil {
			out, err = d.readRange(fd, off, n, dst, direct)
			unix.Close(fd)
		}
		if err != nil && direct && isDirectUnsupported(err) {
			d.fallback(err)
			continue
		}
		if err != nil {
			if errors.Is(err, ErrInvalid) {
				return nil, d.errorf("read", key, err)
			}
			return nil, d.ioError("read", key, err)
		}
		return out, nil
	}
}

func (d *fileDrive) readRange(fd int, off, n int64, dst []byte, direct bool) ([]byte, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	if n < 0 {
		n = st.Size - off
	}
	if n < 0 || off+n > st.Size {
		return nil, fmt.Errorf("%w: range [%d, %d) beyond fragment size %d", ErrInvalid, off, off+n, st.Size)
	}
	if int64(cap(dst)) >= n && (!direct || isAligned(dst)) {
		out := dst[:n]
		return out, preadFull(fd, out, off)
	}
	if int64(cap(dst)) < n { // a new aligned buffer the caller keeps
		out := AlignedBuffer(int(n))
		return out, preadFull(fd, out, off)
	}
	buf := d.bufs.get(int(n)) // unaligned dst: bounce through the pool
	defer d.bufs.put(buf)
	if err := preadFull(fd, buf, off); err != nil {
		return nil, err
	}
	return dst[:copy(dst[:n], buf)], nil
}

// DeleteFragment implements Drive. The removal is not fsynced: a crash may
// bring a deleted fragment back, and garbage collection deletes it again.
func (d *fileDrive) DeleteFragment(ctx context.Context, key erasure.FragmentKey) error {
	if err := d.check(ctx, "delete", key); err != nil {
		return err
	}
	path := d.fanoutPath(fanout(key)) + "/" + fragName(key)
	mu := d.keyLock(key)
	mu.Lock()
	defer mu.Unlock()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); errors.Is(err, unix.ENOENT) {
		return nil
	} else if err != nil {
		return d.ioError("delete", key, err)
	}
	if err := unix.Unlink(path); err != nil && !errors.Is(err, unix.ENOENT) {
		return d.ioError("delete", key, err)
	}
	d.used.Add(-st.Size)
	d.frags.Add(-1)
	return nil
}

// Stat implements Drive.
func (d *fileDrive) Stat(ctx context.Context) (Usage, error) {
	if err := ctx.Err(); err != nil {
		return Usage{}, err
	}
	return usage(d.dir, &d.failed, d.capacity, d.used.Load(), d.frags.Load())
}

// ListFragments implements Drive. Temp files of in-flight writes are
// skipped; foreign files are logged and skipped.
func (d *fileDrive) ListFragments(ctx context.Context, fn func(key erasure.FragmentKey, size int64, mtime time.Time) error) error {
	for i := range fanoutDirs {
		if err := ctx.Err(); err != nil {
			return err
		}
		dirPath := d.fanoutPath(i)
		names, err := readDirNames(dirPath)
		if err != nil {
			return fmt.Errorf("drive %s: list %s: %w", d.dir, dirPath, err)
		}
		for _, name := range names {
			key, ok := parseFragPath(i, name)
			if !ok {
				if len(name) < len(tmpPrefix) || name[:len(tmpPrefix)] != tmpPrefix {
					d.log.Warn("chunkstore: ignoring foreign file", "path", dirPath+"/"+name)
				}
				continue
			}
			var st unix.Stat_t
			if err := unix.Stat(dirPath+"/"+name, &st); errors.Is(err, unix.ENOENT) {
				continue // deleted meanwhile
			} else if err != nil {
				return d.ioError("list", key, err)
			}
			if err := fn(key, st.Size, time.Unix(st.Mtim.Unix())); err != nil {
				return err
			}
		}
	}
	return nil
}

func readDirNames(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}
