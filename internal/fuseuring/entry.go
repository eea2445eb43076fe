package fuseuring

import (
	"encoding/binary"
	"fmt"
	"os"
	"syscall"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// entry is one registered ring entry: its header and payload buffers live
// outside the Go heap (the kernel writes them while no Go pointer says so).
type entry struct {
	mem     []byte // header page, then the payload
	header  []byte
	payload []byte
	scratch []byte // a copy of a request's payload (not WRITE data)
}

func newEntry(payloadSize int) (*entry, error) {
	page := os.Getpagesize()
	payloadSize = (payloadSize + page - 1) &^ (page - 1)
	mem, err := unix.Mmap(-1, 0, page+payloadSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("fuseuring: entry buffers: %w", err)
	}
	e := &entry{mem: mem, header: mem[:headerSize], payload: mem[page:]}
	iov := unsafe.Slice((*unix.Iovec)(unsafe.Pointer(&mem[iovOff])), 2)
	iov[0].Base, iov[0].Len = &mem[0], headerSize
	iov[1].Base, iov[1].Len = &e.payload[0], uint64(len(e.payload))
	return e, nil
}

func (e *entry) opcode() uint32 { return binary.LittleEndian.Uint32(e.header[4:]) }

// serve handles the request in e, writes the reply into e and returns the
// request's commit id.
func (t *Transport) serve(e *entry) uint64 { return t.serveWith(t.ps, e) }

// serveWith is serve with the ProtocolServer ps.
func (t *Transport) serveWith(ps *fuse.ProtocolServer, e *entry) uint64 {
	h := e.header
	ent := h[entOff:headerSize]
	commitID := binary.LittleEndian.Uint64(ent[8:])
	payloadSz := int(binary.LittleEndian.Uint32(ent[16:]))
	length := int(binary.LittleEndian.Uint32(h[0:]))
	opcode := binary.LittleEndian.Uint32(h[4:])
	unique := binary.LittleEndian.Uint64(h[8:])
	opSize := length - inHeaderSize - payloadSz
	if opSize < 0 || opSize > opInSize || payloadSz > len(e.payload) {
		t.opts.Logger.Warn("fuseuring: malformed request", "opcode", opcode, "len", length, "payload", payloadSz)
		e.replyError(unique, syscall.EIO)
		return commitID
	}
	payload := e.payload[:payloadSz]
	if opcode != opWrite {
		// The reply is written over the payload buffer; keep the
		// request's bytes (names, xattr values) apart. WRITE data is
		// consumed before its reply (8 bytes) is written.
		if cap(e.scratch) < payloadSz {
			e.scratch = make([]byte, max(payloadSz, 4096))
		}
		payload = e.scratch[:copy(e.scratch[:payloadSz], payload)]
	}
	in := [][]byte{h[:inHeaderSize], h[opInOff : opInOff+opSize], payload}
	out := [][]byte{h[:outHeaderSize], e.payload}
	n, st := ps.HandleRequest(in, out)
	if st != fuse.OK || n < outHeaderSize {
		if n == 0 && st == fuse.OK {
			st = fuse.ENOSYS // a request that wants no reply has no place here
		}
		t.opts.Logger.Warn("fuseuring: request failed", "opcode", opcode, "status", st)
		e.replyError(unique, syscall.Errno(st))
		return commitID
	}
	binary.LittleEndian.PutUint32(ent[16:], uint32(n-outHeaderSize))
	return commitID
}

// replyError writes an error reply (a header, no payload) to request unique.
func (e *entry) replyError(unique uint64, errno syscall.Errno) {
	h := e.header
	binary.LittleEndian.PutUint32(h[0:], outHeaderSize)
	binary.LittleEndian.PutUint32(h[4:], uint32(-int32(errno)))
	binary.LittleEndian.PutUint64(h[8:], unique)
	binary.LittleEndian.PutUint32(h[entOff+16:], 0)
}

// Init feeds ps the INIT the connection was set up with (kernel settings
// k), as the /dev/fuse server answered it, so that ps parses requests for
// the same protocol version and capabilities.
func Init(ps *fuse.ProtocolServer, k *fuse.InitIn) error {
	in := make([]byte, inHeaderSize+64)
	binary.LittleEndian.PutUint32(in[0:], uint32(len(in)))
	binary.LittleEndian.PutUint32(in[4:], opInit)
	binary.LittleEndian.PutUint64(in[8:], 1)
	b := in[inHeaderSize:]
	binary.LittleEndian.PutUint32(b[0:], k.Major)
	binary.LittleEndian.PutUint32(b[4:], k.Minor)
	binary.LittleEndian.PutUint32(b[8:], k.MaxReadAhead)
	binary.LittleEndian.PutUint32(b[12:], k.Flags)
	binary.LittleEndian.PutUint32(b[16:], k.Flags2)
	out := [][]byte{make([]byte, outHeaderSize), make([]byte, 256)}
	n, st := ps.HandleRequest([][]byte{in}, out)
	if st != fuse.OK || n < outHeaderSize {
		return fmt.Errorf("fuseuring: INIT: %v", st)
	}
	if e := int32(binary.LittleEndian.Uint32(out[0][4:])); e != 0 {
		return fmt.Errorf("fuseuring: INIT: %v", syscall.Errno(-e))
	}
	return nil
}
