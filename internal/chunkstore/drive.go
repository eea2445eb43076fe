package chunkstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"poolfs/internal/erasure"
)

// Drive stores immutable fragments. It is implemented by LocalDrive (a
// directory), by the storage server's RPC client, and by the Throttle and
// WithFaults wrappers. All methods are safe for concurrent use.
type Drive interface {
	// WriteFragment stores frag under key. len(frag) must be a positive
	// multiple of Align (else ErrInvalid). It is durable (data, file and
	// directory entry) and atomic when it returns nil: after a crash the
	// fragment is either absent or whole. A write that would exceed the
	// capacity fails with ErrFull before anything is written. frag is only
	// read during the call; an Align-aligned frag (see AlignedBuffer) saves a
	// copy. With a Deferred context the fragment is visible and atomic on
	// return but durable only at the next Sync (deferred.go).
	WriteFragment(ctx context.Context, key erasure.FragmentKey, frag []byte) error
	// ReadFragment returns bytes [off, off+n) of a fragment, or [off, end)
	// if n < 0. off and n (if n >= 0) must be multiples of Align and inside
	// the fragment (else ErrInvalid). The result uses dst's memory when
	// cap(dst) is large enough, else a new buffer; the caller owns it.
	// Returns an error wrapping ErrNotFound if the fragment is absent.
	ReadFragment(ctx context.Context, key erasure.FragmentKey, off, n int64, dst []byte) ([]byte, error)
	// DeleteFragment removes a fragment; a missing one is not an error.
	DeleteFragment(ctx context.Context, key erasure.FragmentKey) error
	// ListFragments calls fn for every complete fragment, in no particular
	// order, and stops at the first error fn returns, returning it.
	// Fragments written or deleted during the call may or may not be seen.
	ListFragments(ctx context.Context, fn func(key erasure.FragmentKey, size int64, mtime time.Time) error) error
	// Stat reports capacity and usage.
	Stat(ctx context.Context) (Usage, error)
	// Sync makes every deferred write that returned before the call
	// durable (deferred.go); with none it costs nothing. A failure is
	// sticky: it and every later write and Sync fail with ErrFailed.
	Sync(ctx context.Context) error
}

// Usage is the space accounting of a drive.
type Usage struct {
	Capacity  int64 // advertised bytes
	Used      int64 // bytes of stored fragments
	Fragments int64 // number of stored fragments
	// Allocated is the space the drive's files take on the host file
	// system (segments format: record headers, punched records not yet
	// freed, preallocated extents included); 0 when not measured (files
	// format, where it is about Used).
	Allocated int64
	// Kept is the part of Allocated held by deleted small records'
	// extents kept for reuse (segments format, segment_keep.go): at most
	// 16 MiB a drive.
	Kept int64 `json:",omitempty"`
	// HostFree is the space left on the host file system holding the
	// drive for unprivileged writers, and HostFS identifies that file
	// system: drives with the same HostFS share HostFree.
	HostFree int64
	HostFS   uint64
	// Written counts the bytes this drive has written to store fragments
	// since it was opened (LocalDrive: every WriteFragment that returned
	// nil, whoever called it: client writes, rebuilds, repairs, folds,
	// moves; the fragment and, in the segments format, its record header
	// block), so that write amplification can be measured as a
	// difference of two readings. Segment indexes and trailers, file
	// system metadata and the metadata store are not counted; a reopened
	// drive starts again from 0.
	Written int64
	// ServerTime is the clock (unix ns) of the storage server that
	// answered, set by it in its reply to storage.Stat so that the
	// management service can compare clocks; 0 from a local drive or an
	// older server.
	ServerTime int64 `json:",omitempty"`
	// Reads and ReadBytes count the fragment reads that succeeded and the
	// bytes they returned, and Writes the fragments stored, since the
	// drive was opened (LocalDrive), whoever asked: the dashboard's
	// throughput and operation charts are differences of two readings.
	Reads, ReadBytes, Writes int64
}

// Errors. Errors returned by drives wrap these and name the drive and key.
var (
	ErrNotFound = errors.New("chunkstore: fragment not found")
	ErrFull     = errors.New("chunkstore: drive full")
	ErrInvalid  = errors.New("chunkstore: invalid argument")
	ErrFailed   = errors.New("chunkstore: drive failed")
)

// Options configure a LocalDrive. The zero value is valid: buffered I/O,
// capacity = what the file system has, the default format, slog.Default().
type Options struct {
	// Capacity is the advertised size in bytes; writes beyond it fail with
	// ErrFull. 0 means used bytes plus the file system's free space.
	Capacity int64
	// DirectIO uses O_DIRECT for fragment data (recommended; see
	// DefaultOptions). Where the file system refuses O_DIRECT (tmpfs) the
	// drive falls back to buffered I/O once, with a log line.
	DirectIO bool
	// Format is the on-disk format of a new drive (FormatFiles or
	// FormatSegments; "" means DefaultFormat). An existing drive keeps the
	// format its marker file names, whatever this says.
	Format Format
	// SegmentSize is the preallocated size of a segment file (segments
	// format; 0 means DefaultSegmentSize). Fragments larger than a segment
	// get a segment of their own.
	SegmentSize int64
	// Logger receives recovery and fallback notices; nil means slog.Default().
	Logger *slog.Logger
}

// DefaultOptions returns the production options: Direct I/O on, capacity
// from the file system.
func DefaultOptions() Options { return Options{DirectIO: true} }

// Validate rejects bad options.
func (o Options) Validate() error {
	if o.Capacity < 0 {
		return fmt.Errorf("%w: negative capacity %d", ErrInvalid, o.Capacity)
	}
	if o.SegmentSize < 0 || o.SegmentSize%Align != 0 {
		return fmt.Errorf("%w: segment size %d is not a non-negative multiple of %d", ErrInvalid, o.SegmentSize, Align)
	}
	switch o.Format {
	case "", FormatFiles, FormatSegments:
	default:
		return fmt.Errorf("%w: unknown drive format %q (want %q or %q)", ErrInvalid, o.Format, FormatFiles, FormatSegments)
	}
	return nil
}

var (
	_ Drive = (*LocalDrive)(nil)
	_ Drive = (*fileDrive)(nil)
	_ Drive = (*segmentDrive)(nil)
)

// sticky is a drive's first failure that leaves it failed for good: a
// failed fdatasync (the kernel may have dropped dirty pages, so a retry
// could falsely report durability) or a directory of the drive gone. Once
// set, writes and Stat fail with ErrFailed, so the failure detector's probe
// sees what the failed write saw.
type sticky struct{ p atomic.Pointer[error] }

func (s *sticky) set(err error) { s.p.CompareAndSwap(nil, &err) }

// err returns nil, or an error wrapping ErrFailed and the first failure.
func (s *sticky) err() error {
	if p := s.p.Load(); p != nil {
		return fmt.Errorf("%w: earlier failure: %w", ErrFailed, *p)
	}
	return nil
}

// opError names the drive, the operation and the key.
func opError(dir, op string, key erasure.FragmentKey, err error) error {
	return fmt.Errorf("drive %s: %s fragment %v: %w", dir, op, key, err)
}

// sysError wraps a system error of op; device failures also wrap ErrFailed
// and ENOSPC wraps ErrFull. Callers handle the ENOENT they expect (a
// fragment that is absent) before; any other ENOENT means a directory of
// the drive vanished under it (removed, or its file system unmounted),
// which is a drive failure too.
func sysError(dir, op string, key erasure.FragmentKey, err error) error {
	if errors.Is(err, unix.ENOSPC) {
		return fmt.Errorf("drive %s: %s fragment %v: %w: %w", dir, op, key, ErrFull, err)
	}
	if isDeviceFailure(err) {
		return fmt.Errorf("drive %s: %s fragment %v: %w: %w", dir, op, key, ErrFailed, err)
	}
	if damaged(err) {
		return fmt.Errorf("drive %s: %s fragment %v: %w: drive directory damaged: %w", dir, op, key, ErrFailed, err)
	}
	return opError(dir, op, key, err)
}

// damaged reports whether err, met where the drive expects its directories
// (not a fragment lookup), means part of the drive's tree is gone.
func damaged(err error) bool { return errors.Is(err, unix.ENOENT) }

// goneError returns an error wrapping ErrFailed if err is ENOENT and the
// drive's directory has lost its format marker (deleted under a running
// server, or its file system unmounted): the drive as a whole is gone,
// which is a drive failure, not a missing fragment. Otherwise nil.
func goneError(dir string, err error) error {
	if !errors.Is(err, unix.ENOENT) {
		return nil
	}
	if cerr := CheckDir(dir); cerr != nil {
		return fmt.Errorf("%w: drive directory is gone: %w", ErrFailed, cerr)
	}
	return nil
}

func (d *fileDrive) errorf(op string, key erasure.FragmentKey, err error) error {
	return opError(d.dir, op, key, err)
}

// ioError is sysError; a drive whose directory is damaged stays failed.
func (d *fileDrive) ioError(op string, key erasure.FragmentKey, err error) error {
	if damaged(err) {
		d.failed.set(err)
	}
	return sysError(d.dir, op, key, err)
}

func checkFragLen(n int) error {
	if n <= 0 || n%Align != 0 {
		return fmt.Errorf("%w: fragment length %d is not a positive multiple of %d", ErrInvalid, n, Align)
	}
	return nil
}

func checkRange(off, n int64) error {
	if off < 0 || off%Align != 0 || (n >= 0 && n%Align != 0) {
		return fmt.Errorf("%w: range off=%d n=%d not aligned to %d", ErrInvalid, off, n, Align)
	}
	return nil
}

// reserve adds size bytes to used before a write, or fails with ErrFull:
// beyond capacity, or (capacity 0) beyond the free space of the file
// system holding dir.
func reserve(dir string, capacity int64, used *atomic.Int64, size int64) error {
	if capacity == 0 {
		var st unix.Statfs_t
		if err := unix.Statfs(dir, &st); err != nil {
			return err
		}
		if free := int64(st.Bavail) * st.Bsize; size > free {
			return fmt.Errorf("%w: %d bytes wanted, file system has %d free", ErrFull, size, free)
		}
		used.Add(size)
		return nil
	}
	for {
		u := used.Load()
		if u+size > capacity {
			return fmt.Errorf("%w: %d bytes wanted, %d of %d used", ErrFull, size, u, capacity)
		}
		if used.CompareAndSwap(u, u+size) {
			return nil
		}
	}
}

// usage is a drive's Stat: capacity 0 means used bytes plus the free space
// of the file system holding dir.
// A drive that failed for good (f) or whose directory is gone fails with
// ErrFailed.
func usage(dir string, f *sticky, capacity, used, frags int64) (Usage, error) {
	if err := f.err(); err != nil {
		return Usage{}, fmt.Errorf("drive %s: stat: %w", dir, err)
	}
	if err := CheckDir(dir); err != nil {
		if gone := goneError(dir, err); gone != nil {
			return Usage{}, fmt.Errorf("drive %s: stat: %w", dir, gone)
		}
		return Usage{}, fmt.Errorf("drive %s: stat: %w", dir, err)
	}
	u := Usage{Capacity: capacity, Used: used, Fragments: frags}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return Usage{}, fmt.Errorf("drive %s: statfs: %w", dir, err)
	}
	u.HostFree = int64(st.Bavail) * st.Bsize
	u.HostFS = uint64(uint32(st.Fsid.Val[0]))<<32 | uint64(uint32(st.Fsid.Val[1]))
	if u.Capacity == 0 {
		u.Capacity = u.Used + u.HostFree
	}
	return u, nil
}
