package chunkstore

import (
	"errors"
	"io"
	"math/bits"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Align is the block size and memory alignment of Direct I/O; fragment
// lengths, read offsets and read lengths are multiples of it. It equals
// erasure.Align.
const Align = 4096

// AlignedBuffer returns a zeroed buffer of n bytes whose first byte is
// Align-aligned in memory. Callers that pass such buffers to WriteFragment
// and ReadFragment save a copy per I/O on the Direct I/O path.
func AlignedBuffer(n int) []byte {
	b := make([]byte, n+Align)
	off := 0
	if r := int(uintptr(unsafe.Pointer(unsafe.SliceData(b))) & (Align - 1)); r != 0 {
		off = Align - r
	}
	return b[off : off+n : off+n]
}

func isAligned(b []byte) bool {
	return cap(b) == 0 || uintptr(unsafe.Pointer(unsafe.SliceData(b)))&(Align-1) == 0
}

// Size classes of pooled aligned buffers: powers of two from 4 KiB to
// 64 MiB. Larger requests are allocated and dropped.
const (
	minClassShift = 12
	numClasses    = 15
)

// bufPool is a set of sync.Pools of aligned buffers by size class. The zero
// value is ready to use; it is safe for concurrent use.
type bufPool struct {
	classes [numClasses]sync.Pool
}

func sizeClass(n int) int {
	if n <= 1<<minClassShift {
		return 0
	}
	return bits.Len(uint(n-1)) - minClassShift
}

// Buffers is a pool of Align-aligned buffers by size class, for callers
// that read fragments into memory of their own and can tell when they are
// done with it (the storage server's read replies): a reused buffer costs
// neither an allocation nor the zeroing of one. The zero value is ready to
// use; it is safe for concurrent use.
type Buffers struct{ p bufPool }

// Get returns an aligned buffer of length n whose capacity is its size
// class; its bytes are whatever a previous user left. Release it with Put.
func (b *Buffers) Get(n int) []byte { return b.p.get(n) }

// Put hands back a buffer Get returned; the caller must not use it after.
func (b *Buffers) Put(buf []byte) { b.p.put(buf) }

// get returns an aligned buffer of length n. Release it with put.
func (p *bufPool) get(n int) []byte {
	c := sizeClass(n)
	if c >= numClasses {
		return AlignedBuffer(n)
	}
	if v := p.classes[c].Get(); v != nil {
		return (*(v.(*[]byte)))[:n]
	}
	return AlignedBuffer(1 << (c + minClassShift))[:n]
}

func (p *bufPool) put(b []byte) {
	b = b[:cap(b)]
	c := sizeClass(len(b))
	if c >= numClasses || len(b) != 1<<(c+minClassShift) {
		return
	}
	p.classes[c].Put(&b)
}

// pwriteFull writes all of b at off, retrying short writes and EINTR.
func pwriteFull(fd int, b []byte, off int64) error {
	for len(b) > 0 {
		n, err := unix.Pwrite(fd, b, off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return io.ErrShortWrite
		}
		b, off = b[n:], off+int64(n)
	}
	return nil
}

// preadFull fills b from off; a short file yields io.ErrUnexpectedEOF.
func preadFull(fd int, b []byte, off int64) error {
	for len(b) > 0 {
		n, err := unix.Pread(fd, b, off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return io.ErrUnexpectedEOF
		}
		b, off = b[n:], off+int64(n)
	}
	return nil
}

// isDirectUnsupported reports whether err means the file system refuses
// O_DIRECT (tmpfs and some FUSE file systems return EINVAL).
func isDirectUnsupported(err error) bool {
	return errors.Is(err, unix.EINVAL)
}

// isDeviceFailure reports errors that mean the drive itself is unusable.
func isDeviceFailure(err error) bool {
	return errors.Is(err, unix.EIO) || errors.Is(err, unix.EROFS) || errors.Is(err, unix.ENXIO)
}
