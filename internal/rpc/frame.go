package rpc

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"slices"
)

// Frame layout (big endian), headerSize bytes, then method, args, body;
// after the handshake each part travels sealed in records (record.go):
//
//	magic u16 | type u8 | flags u8 | id u64 | nameLen u16 | argsLen u32 | bodyLen u64
const (
	frameMagic = 0x5046 // "PF"
	headerSize = 2 + 1 + 1 + 8 + 2 + 4 + 8

	maxMethodLen = 128      // bytes of method name or error code
	maxArgsLen   = 16 << 20 // bytes of JSON args, result or error message

	// DefaultMaxBody is the default limit on a frame body, in both directions.
	DefaultMaxBody = 256 << 20

	// readBufSize is the read buffer of an authenticated connection.
	readBufSize = 64 << 10
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

// frameReader reads and opens the frames of one direction of an
// authenticated connection. The caller reads the body itself (readBody or
// discardBody) after readMeta.
type frameReader struct {
	br      *bufio.Reader
	maxBody int64
	cs      cipherState
	pool    *bufPool // record buffers
	hdr     [sealedHeaderSize]byte
	scratch []byte // backs name and args of the current frame
}

// readHeader reads the next header. A clean close between frames is io.EOF;
// a bad header wraps ErrProtocol, an altered or out-of-order one also
// ErrTampered.
func (r *frameReader) readHeader() (header, error) {
	if _, err := io.ReadFull(r.br, r.hdr[:]); err != nil {
		return header{}, err
	}
	plain, err := r.cs.open(r.hdr[:0], r.hdr[:])
	if err != nil {
		return header{}, err
	}
	return parseHeader(plain, r.maxBody)
}

// readMeta reads the name and args of h. They alias a scratch buffer that
// is valid until the next readMeta. Records are read and opened in place in
// the scratch buffer, which grows only as records arrive, so a peer cannot
// make us allocate much more than it sends.
func (r *frameReader) readMeta(h header) (name, args []byte, err error) {
	n := h.nameLen + h.argsLen
	buf := r.scratch[:0]
	for len(buf) < n {
		m := min(n-len(buf), recordMax)
		buf = slices.Grow(buf, m+tagSize)
		rec := buf[len(buf) : len(buf)+m+tagSize]
		if _, err := io.ReadFull(r.br, rec); err != nil {
			return nil, nil, unexpectedEOF(err)
		}
		if _, err := r.cs.open(rec[:0], rec); err != nil {
			return nil, nil, err
		}
		buf = buf[:len(buf)+m]
	}
	r.scratch = buf
	if cap(buf) > keepScratch {
		r.scratch = nil // the caller's slices stay valid; we just drop ours
	}
	return buf[:h.nameLen:h.nameLen], buf[h.nameLen:n:n], nil
}

// readBody reads and opens the body section into dst (exactly len(dst)
// bytes). Each record is read into a pooled record buffer, which stays in
// the CPU cache, and decrypted from there into dst: the body crosses
// memory once. On error dst holds an undefined prefix of the body.
func (r *frameReader) readBody(dst []byte) error {
	return r.readSection(dst, len(dst))
}

// discardBody reads, checks and drops a body section of n bytes.
func (r *frameReader) discardBody(n int) error {
	return r.readSection(nil, n)
}

func (r *frameReader) readSection(dst []byte, n int) error {
	if n == 0 {
		return nil
	}
	handle, rec := r.pool.get(min(sealedLen(n), sealedMax))
	defer r.pool.put(handle)
	for off := 0; off < n; {
		m := min(n-off, recordMax)
		sealed := rec[:m+tagSize]
		if _, err := io.ReadFull(r.br, sealed); err != nil {
			return unexpectedEOF(err)
		}
		out := sealed[:0] // discarding: open in place
		if dst != nil {
			out = dst[off:off]
		}
		if _, err := r.cs.open(out, sealed); err != nil {
			return err
		}
		off += m
	}
	return nil
}

func unexpectedEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// frameWriter seals and writes whole frames. There is never more than one
// frame in flight per connection: the records of a frame are sealed into a
// pooled buffer of up to writeBatch bytes, written with one write call
// each time it fills, so a small frame costs one write and a body is read
// once, from the caller's slice, by the cipher.
type frameWriter struct {
	w       io.Writer
	maxBody int64
	cs      cipherState
	pool    *bufPool
	hdr     [headerSize]byte // a field, not a local: the cipher would make a local escape
	out     []byte           // the pooled buffer of the frame being written
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
	hdr := w.hdr[:]
	putHeader(hdr, header{typ: typ, id: id, nameLen: len(name), argsLen: len(args), bodyLen: len(body)})
	total := sealedHeaderSize + sealedLen(len(name)+len(args)) + sealedLen(len(body))
	handle, buf := w.pool.get(min(total, writeBatch))
	defer func() {
		w.out = nil
		w.pool.put(handle)
	}()
	w.out = w.cs.seal(buf[:0], hdr)
	if err := w.section(name, args); err != nil {
		return err
	}
	if err := w.section("", body); err != nil {
		return err
	}
	_, err := w.w.Write(w.out)
	return err
}

// section seals a followed by b as one section, writing out whenever the
// next record would not fit. A record that lies in b alone is sealed
// straight from b; one that spans a and b is gathered in out and sealed in
// place.
func (w *frameWriter) section(a string, b []byte) error {
	for len(a)+len(b) > 0 {
		m := min(len(a)+len(b), recordMax)
		if len(w.out)+m+tagSize > cap(w.out) {
			if _, err := w.w.Write(w.out); err != nil {
				return err
			}
			w.out = w.out[:0]
		}
		if len(a) == 0 {
			w.out = w.cs.seal(w.out, b[:m])
			b = b[m:]
			continue
		}
		start := len(w.out)
		na := min(len(a), m)
		w.out = append(append(w.out, a[:na]...), b[:m-na]...)
		w.out = w.cs.seal(w.out[:start], w.out[start:start+m])
		a, b = a[na:], b[m-na:]
	}
	return nil
}
