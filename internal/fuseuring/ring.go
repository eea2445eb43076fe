package fuseuring

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// io_uring constants (include/uapi/linux/io_uring.h).
const (
	setupSQE128    = 1 << 10
	enterGetevents = 1
	offSQRing      = 0
	offCQRing      = 0x8000000
	offSQEs        = 0x10000000
	featSingleMmap = 1 << 0
	opNop          = 0
	opIORead       = 22 // IORING_OP_READ
	opURingCmd     = 46
	sqeSize        = 128 // with setupSQE128
	cqeSize        = 16
)

type sqringOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

type cqringOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

type params struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFd uint32
	resv                                                                   [3]uint32
	sqOff                                                                  sqringOffsets
	cqOff                                                                  cqringOffsets
}

// sqe is the fixed part of a submission queue entry; the command area of
// an IORING_OP_URING_CMD starts at cmd and runs to the end of the 128-byte
// entry.
type sqe struct {
	opcode      uint8
	flags       uint8
	ioprio      uint16
	fd          int32
	off         uint64 // cmd_op (low 32 bits) for URING_CMD
	addr        uint64
	len         uint32
	opFlags     uint32
	userData    uint64
	bufIndex    uint16
	personality uint16
	spliceFdIn  int32
	cmd         [80]byte
}

type cqe struct {
	userData uint64
	res      int32
	flags    uint32
}

// ring is a minimal io_uring with 128-byte submission entries. Any
// goroutine may submit (submissions are serialised by mu); only the owner
// waits for and reaps completions.
type ring struct {
	mu      sync.Mutex // submission side
	fd      int
	sqMem   []byte
	cqMem   []byte
	sqesMem []byte
	sqHead  *uint32
	sqTail  *uint32
	sqMask  uint32
	sqArray []uint32
	cqHead  *uint32
	cqTail  *uint32
	cqMask  uint32
	cqes    []cqe
	sqes    []sqe
}

func newRing(entries uint32) (*ring, error) {
	var p params
	p.flags = setupSQE128
	fd, _, errno := syscall.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(&p)), 0)
	if errno != 0 {
		return nil, fmt.Errorf("io_uring_setup: %w", errno)
	}
	r := &ring{fd: int(fd)}
	fail := func(err error) (*ring, error) {
		r.close()
		return nil, err
	}
	sqLen := int(p.sqOff.array + p.sqEntries*4)
	cqLen := int(p.cqOff.cqes + p.cqEntries*cqeSize)
	if p.features&featSingleMmap != 0 {
		sqLen = max(sqLen, cqLen)
	}
	var err error
	if r.sqMem, err = unix.Mmap(r.fd, offSQRing, sqLen, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		return fail(fmt.Errorf("io_uring: map submission ring: %w", err))
	}
	if p.features&featSingleMmap != 0 {
		r.cqMem = r.sqMem
	} else if r.cqMem, err = unix.Mmap(r.fd, offCQRing, cqLen, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		return fail(fmt.Errorf("io_uring: map completion ring: %w", err))
	}
	if r.sqesMem, err = unix.Mmap(r.fd, offSQEs, int(p.sqEntries)*sqeSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		return fail(fmt.Errorf("io_uring: map submission entries: %w", err))
	}
	u32 := func(b []byte, off uint32) *uint32 { return (*uint32)(unsafe.Pointer(&b[off])) }
	r.sqHead, r.sqTail = u32(r.sqMem, p.sqOff.head), u32(r.sqMem, p.sqOff.tail)
	r.sqMask = *u32(r.sqMem, p.sqOff.ringMask)
	r.sqArray = unsafe.Slice(u32(r.sqMem, p.sqOff.array), p.sqEntries)
	r.cqHead, r.cqTail = u32(r.cqMem, p.cqOff.head), u32(r.cqMem, p.cqOff.tail)
	r.cqMask = *u32(r.cqMem, p.cqOff.ringMask)
	r.cqes = unsafe.Slice((*cqe)(unsafe.Pointer(&r.cqMem[p.cqOff.cqes])), p.cqEntries)
	r.sqes = unsafe.Slice((*sqe)(unsafe.Pointer(&r.sqesMem[0])), p.sqEntries)
	return r, nil
}

func (r *ring) close() {
	if r.sqesMem != nil {
		_ = unix.Munmap(r.sqesMem)
	}
	if r.cqMem != nil && &r.cqMem[0] != &r.sqMem[0] {
		_ = unix.Munmap(r.cqMem)
	}
	if r.sqMem != nil {
		_ = unix.Munmap(r.sqMem)
	}
	syscall.Close(r.fd)
}

// errRingFull means every submission entry is taken.
var errRingFull = errors.New("io_uring: submission ring full")

// submit publishes a submission entry filled by fill and enters the
// kernel to submit it.
func (r *ring) submit(fill func(*sqe)) error {
	if err := r.publish(fill); err != nil {
		return err
	}
	return r.enter(false)
}

// publish fills a submission entry with fill and makes it visible to the
// kernel, which takes it at the next enter (by any goroutine).
func (r *ring) publish(fill func(*sqe)) error {
	r.mu.Lock()
	tail := *r.sqTail
	if tail-atomic.LoadUint32(r.sqHead) >= uint32(len(r.sqes)) {
		r.mu.Unlock()
		return errRingFull
	}
	i := tail & r.sqMask
	e := &r.sqes[i]
	*e = sqe{}
	fill(e)
	r.sqArray[i] = i
	atomic.StoreUint32(r.sqTail, tail+1)
	r.mu.Unlock()
	return nil
}

// enter submits what is published and not yet consumed by the kernel and,
// with wait, blocks until at least one completion is there.
func (r *ring) enter(wait bool) error {
	var minComplete, flags uintptr
	if wait {
		minComplete, flags = 1, enterGetevents
	}
	for {
		n := atomic.LoadUint32(r.sqTail) - atomic.LoadUint32(r.sqHead)
		_, _, errno := syscall.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(n), minComplete, flags, 0, 0)
		switch errno {
		case 0:
			return nil
		case syscall.EINTR:
			continue
		default:
			return fmt.Errorf("io_uring_enter: %w", errno)
		}
	}
}

// reap calls fn for every completion there is and consumes them.
func (r *ring) reap(fn func(c cqe)) {
	head := *r.cqHead
	for head != atomic.LoadUint32(r.cqTail) {
		c := r.cqes[head&r.cqMask]
		head++
		atomic.StoreUint32(r.cqHead, head)
		fn(c)
	}
}
