package rpc

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
)

// Frame layout (big endian), headerSize bytes, then method, args, body:
//
//	magic u16 | type u8 | flags u8 | id u64 | nameLen u16 | argsLen u32 | bodyLen u64
const (
	frameMagic = 0x5046 // "PF"
	headerSize = 2 + 1 + 1 + 8 + 2 + 4 + 8

	maxMethodLen = 128      // bytes of method name or error code
	maxArgsLen   = 16 << 20 // bytes of JSON args, result or error message

	// DefaultMaxBody is the default limit on a frame body, in both directions.
	DefaultMaxBody = 256 << 20

	// smallWrite is the largest body copied into the header buffer and sent
	// with one write; larger bodies are sent with writev straight from the
	// caller's slice.
	smallWrite = 32 << 10
	// argsChunk is the step by which a large args buffer grows as data
	// arrives, so a peer cannot make us allocate more than it sends.
	argsChunk = 64 << 10
	// keepScratch is the largest scratch buffer kept between frames.
	keepScratch = 1 << 20
)

type frameType uint8

const (
	typeRequest  frameType = 1
	typeResponse frameType = 2
	typeError    frameType = 3 // name = error code, args = message text
	typeAuth     frameType = 4 // handshake verdict, args = server MAC
)

type header struct {
	typ     frameType
	flags   uint8 // reserved, must be zero
	id      uint64
	nameLen int
	argsLen int
	bodyLen int
}

func putHeader(b []byte, h header) {
	_ = b[headerSize-1]
	binary.BigEndian.PutUint16(b[0:], frameMagic)
	b[2] = byte(h.typ)
	b[3] = h.flags
	binary.BigEndian.PutUint64(b[4:], h.id)
	binary.BigEndian.PutUint16(b[12:], uint16(h.nameLen))
	binary.BigEndian.PutUint32(b[14:], uint32(h.argsLen))
	binary.BigEndian.PutUint64(b[18:], uint64(h.bodyLen))
}

// parseHeader decodes and checks a header. Every length is checked against
// its limit here, before anybody allocates for it.
func parseHeader(b []byte, maxBody int64) (header, error) {
	if len(b) < headerSize {
		return header{}, fmt.Errorf("%w: short header", ErrProtocol)
	}
	if m := binary.BigEndian.Uint16(b[0:]); m != frameMagic {
		return header{}, fmt.Errorf("%w: bad frame magic %#04x", ErrProtocol, m)
	}
	h := header{typ: frameType(b[2]), flags: b[3], id: binary.BigEndian.Uint64(b[4:])}
	if h.typ < typeRequest || h.typ > typeAuth {
		return header{}, fmt.Errorf("%w: bad frame type %d", ErrProtocol, h.typ)
	}
	if h.flags != 0 {
		return header{}, fmt.Errorf("%w: unknown frame flags %#x", ErrProtocol, h.flags)
	}
	nameLen := binary.BigEndian.Uint16(b[12:])
	argsLen := binary.BigEndian.Uint32(b[14:])
	bodyLen := binary.BigEndian.Uint64(b[18:])
	if nameLen > maxMethodLen {
		return header{}, fmt.Errorf("%w: method length %d > %d", ErrProtocol, nameLen, maxMethodLen)
	}
	if argsLen > maxArgsLen {
		return header{}, fmt.Errorf("%w: args length %d > %d", ErrProtocol, argsLen, maxArgsLen)
	}
	if bodyLen > uint64(maxBody) {
		return header{}, fmt.Errorf("%w: body length %d > %d", ErrProtocol, bodyLen, maxBody)
	}
	h.nameLen, h.argsLen, h.bodyLen = int(nameLen), int(argsLen), int(bodyLen)
	return h, nil
}

// frameReader reads frames from a buffered connection. The caller reads the
// body itself (readBody or br.Discard) after readMeta.
type frameReader struct {
	br      *bufio.Reader
	maxBody int64
	hdr     [headerSize]byte
	scratch []byte // backs name and args of the current frame
}

// readHeader reads the next header. A clean close between frames is io.EOF;
// a bad header wraps ErrProtocol.
func (r *frameReader) readHeader() (header, error) {
	if _, err := io.ReadFull(r.br, r.hdr[:]); err != nil {
		return header{}, err
	}
	return parseHeader(r.hdr[:], r.maxBody)
}

// readMeta reads the name and args of h. They alias a scratch buffer that
// is valid until the next readMeta.
func (r *frameReader) readMeta(h header) (name, args []byte, err error) {
	n := h.nameLen + h.argsLen
	buf := r.scratch[:0]
	for len(buf) < n {
		step := n - len(buf)
		if len(buf)+step > cap(buf) {
			// Grow no faster than the data arrives: at most doubling,
			// in steps of at least argsChunk.
			step = min(step, max(len(buf), argsChunk))
			if len(buf)+step > cap(buf) {
				buf = append(buf[:cap(buf)], make([]byte, len(buf)+step-cap(buf))...)[:len(buf)]
			}
		}
		if _, err := io.ReadFull(r.br, buf[len(buf):len(buf)+step]); err != nil {
			return nil, nil, unexpectedEOF(err)
		}
		buf = buf[:len(buf)+step]
	}
	r.scratch = buf
	if cap(buf) > keepScratch {
		r.scratch = nil // the caller's slices stay valid; we just drop ours
	}
	return buf[:h.nameLen:h.nameLen], buf[h.nameLen:n:n], nil
}

// readBody reads exactly len(dst) bytes. bufio reads large slices straight
// from the socket, so a big body is copied once, kernel to dst.
func (r *frameReader) readBody(dst []byte) error {
	_, err := io.ReadFull(r.br, dst)
	return unexpectedEOF(err)
}

func unexpectedEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// frameWriter writes whole frames with one write or writev call; there is
// never more than one frame in flight per connection, so no bufio.Writer is
// needed: header, name and args are assembled in scratch, and a large body
// goes out as a second iovec without being copied.
type frameWriter struct {
	w       io.Writer
	maxBody int64
	scratch []byte
}

func (w *frameWriter) write(typ frameType, id uint64, name string, args, body []byte) error {
	switch {
	case len(name) > maxMethodLen:
		return fmt.Errorf("%w: method %.32q... longer than %d bytes", ErrProtocol, name, maxMethodLen)
	case len(args) > maxArgsLen:
		return fmt.Errorf("%w: args of %d bytes > %d", ErrProtocol, len(args), maxArgsLen)
	case int64(len(body)) > w.maxBody:
		return fmt.Errorf("%w: body of %d bytes > %d", ErrProtocol, len(body), w.maxBody)
	}
	h := header{typ: typ, id: id, nameLen: len(name), argsLen: len(args), bodyLen: len(body)}
	b := append(w.scratch[:0], make([]byte, headerSize)...)
	putHeader(b, h)
	b = append(b, name...)
	b = append(b, args...)
	var err error
	if len(body) <= smallWrite {
		b = append(b, body...)
		_, err = w.w.Write(b)
	} else {
		bufs := net.Buffers{b, body}
		_, err = bufs.WriteTo(w.w)
	}
	if cap(b) <= keepScratch {
		w.scratch = b[:0]
	} else {
		w.scratch = nil
	}
	return err
}
