package meta

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
)

// Values are a compact binary encoding: a format byte, then fields as
// varints and length-prefixed strings. Every decoder checks bounds and
// rejects trailing bytes; fuzz tests in codec_test.go hold them to it.

const codecV1 = 1

// codecV3 is the stripe record format with a checksum (encodeStripe).
// Records of formats 1 and 2, written before, decode unchecked.
const codecV3 = 3

// codecV2 is the stripe record format that carries the stripe's own data
// fragment count (StripeRec.K) after the drives. Stripe records of format 1
// decode with K = 0 ("the layout's K"); other records are format 1.
const codecV2 = 2

// inode is the stored inode record: the attributes plus the parent of a
// directory (for rename loop checks and ".."). Ino is not stored; it is the key.
type inode struct {
	Attr
	Parent Ino // directories only; 0 otherwise
	// clean says what the inode is known never to have had, so that
	// destroying it needs no scan for them (an unlink of an empty file
	// is then a few point writes), and whether Attr.Stored is counted.
	// Records written before the field existed decode as 0: nothing
	// known, everything is scanned.
	clean uint8
}

// Bits of inode.clean.
const (
	cleanNoXattrs  = 1 << iota // no extended attribute was ever set
	cleanNoStripes             // no stripe was ever committed
	// storedCounted: Attr.Stored is the exact sum of the committed
	// stripes' Len, kept by every transaction that commits or drops a
	// stripe; the field follows the flags. Without it (files written
	// before the count existed) Stored decodes as Size, and the first
	// transaction that changes the file's stripes counts them (countStored).
	storedCounted
	cleanAll  = cleanNoXattrs | cleanNoStripes
	cleanMask = cleanAll | storedCounted
)

type enc struct{ b []byte }

func (e *enc) uv(v uint64)  { e.b = binary.AppendUvarint(e.b, v) }
func (e *enc) sv(v int64)   { e.b = binary.AppendVarint(e.b, v) }
func (e *enc) byte1(v byte) { e.b = append(e.b, v) }
func (e *enc) str(s string) { e.uv(uint64(len(s))); e.b = append(e.b, s...) }
func (e *enc) u32s(v []uint32) {
	e.uv(uint64(len(v)))
	for _, x := range v {
		e.uv(uint64(x))
	}
}

type dec struct {
	b   []byte
	err error
}

func (d *dec) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("decode %s: %w", what, ErrCorrupt)
	}
}

func (d *dec) uv(max uint64) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 || v > max {
		d.fail("uvarint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) u32() uint32 { return uint32(d.uv(math.MaxUint32)) }
func (d *dec) u64() uint64 { return d.uv(math.MaxUint64) }

func (d *dec) sv() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) byte1() byte {
	if d.err != nil || len(d.b) == 0 {
		d.fail("byte")
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *dec) str(max int) string {
	n := d.uv(uint64(max))
	if d.err != nil || uint64(len(d.b)) < n {
		d.fail("string")
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *dec) u32s(max int) []uint32 {
	n := d.uv(uint64(max))
	if d.err != nil || uint64(len(d.b)) < n { // each element takes >= 1 byte
		d.fail("list")
		return nil
	}
	v := make([]uint32, n)
	for i := range v {
		v[i] = d.u32()
	}
	return v
}

func (d *dec) version() {
	if d.byte1() != codecV1 && d.err == nil {
		d.fail("format version")
	}
}

// endLazy is end with the record's name made only for an error.
func (d *dec) endLazy(what func() string) error {
	if d.err == nil && len(d.b) == 0 {
		return nil
	}
	return d.end(what())
}

func (d *dec) end(what string) error {
	if d.err == nil && len(d.b) != 0 {
		d.fail(what + ": trailing bytes")
	}
	if d.err != nil {
		return fmt.Errorf("%s: %w", what, d.err)
	}
	return nil
}

func encodeInode(n *inode) []byte { return appendInode(make([]byte, 0, 64+len(n.Target)), n) }

func appendInode(b []byte, n *inode) []byte {
	e := enc{b: b}
	e.byte1(codecV1)
	e.byte1(byte(n.Type))
	e.uv(uint64(n.Mode))
	e.uv(uint64(n.Uid))
	e.uv(uint64(n.Gid))
	e.uv(uint64(n.Nlink))
	e.uv(n.Size)
	e.sv(n.Atime)
	e.sv(n.Mtime)
	e.sv(n.Ctime)
	e.uv(uint64(n.Rdev))
	e.uv(uint64(n.Layout.Pool))
	e.uv(uint64(n.Layout.K))
	e.uv(uint64(n.Layout.M))
	e.uv(uint64(n.Layout.Unit))
	if n.Layout.Mirror {
		e.byte1(1)
	} else {
		e.byte1(0)
	}
	e.uv(uint64(n.Parent))
	e.str(n.Target)
	if n.clean != 0 { // optional trailing field, absent when 0
		e.uv(uint64(n.clean))
	}
	if n.clean&storedCounted != 0 {
		e.uv(n.Stored)
	}
	return e.b
}

func decodeInode(ino Ino, b []byte) (inode, error) {
	d := dec{b: b}
	var n inode
	n.Ino = ino
	d.version()
	n.Type = FileType(d.byte1())
	if d.err == nil && !n.Type.valid() {
		d.fail("file type")
	}
	n.Mode = uint32(d.uv(PermMask))
	n.Uid = d.u32()
	n.Gid = d.u32()
	n.Nlink = d.u32()
	n.Size = d.u64()
	n.Atime = d.sv()
	n.Mtime = d.sv()
	n.Ctime = d.sv()
	n.Rdev = d.u32()
	n.Layout.Pool = d.u32()
	n.Layout.K = int(d.uv(MaxDrives))
	n.Layout.M = int(d.uv(MaxDrives))
	n.Layout.Unit = d.u32()
	switch d.byte1() {
	case 0:
	case 1:
		n.Layout.Mirror = true
	default:
		d.fail("mirror flag")
	}
	n.Parent = Ino(d.u64())
	n.Target = d.str(MaxTargetLen)
	if d.err == nil && len(d.b) > 0 {
		if n.clean = uint8(d.uv(cleanMask)); n.clean == 0 && d.err == nil {
			d.fail("clean flags 0 are written as none") // one encoding per inode
		}
	}
	switch {
	case n.clean&storedCounted != 0:
		n.Stored = d.u64()
	case n.Type == TypeFile && n.clean&cleanNoStripes == 0:
		n.Stored = n.Size // not counted yet: as before the count existed
	}
	return n, d.end(fmt.Sprintf("inode %d", ino))
}

func encodeDirent(ino Ino, t FileType) []byte {
	e := enc{b: make([]byte, 0, 11)}
	e.uv(uint64(ino))
	e.byte1(byte(t))
	return e.b
}

func decodeDirent(b []byte) (Ino, FileType, error) {
	d := dec{b: b}
	ino := Ino(d.u64())
	t := FileType(d.byte1())
	if d.err == nil && !t.valid() {
		d.fail("file type")
	}
	return ino, t, d.end("dirent")
}

// storedStripe is the stored stripe record: the StripeRec plus the pool
// it was committed in (for the PG index and usage accounting).
type storedStripe struct {
	StripeRec
	Pool uint32
}

func (s *storedStripe) raw() int64 { return int64(s.ShardSize) * int64(len(s.Drives)) }

// encodeStripe encodes stripe record s of file ino in format 3: the
// fields of format 2 (K always present, 0 meaning the layout's) and a
// CRC32C (big-endian) of the record's key (ino, stripe) and of the bytes
// before it, so that a record damaged in the store, or found under another
// key, fails to decode instead of reading as another stripe.
func encodeStripe(ino Ino, s *storedStripe) []byte {
	e := enc{b: make([]byte, 0, 31+5*len(s.Drives))}
	e.byte1(codecV3)
	e.uv(s.Gen)
	e.uv(uint64(s.PG))
	e.uv(uint64(s.Len))
	e.uv(uint64(s.ShardSize))
	e.uv(uint64(s.Pool))
	e.u32s(s.Drives)
	e.uv(uint64(s.K))
	return binary.BigEndian.AppendUint32(e.b, stripeCRC(ino, s.Stripe, e.b))
}

// stripeCRC is the checksum of a format 3 stripe record: CRC32C of the
// key's ino and stripe (8 bytes big-endian each) and the record body.
func stripeCRC(ino Ino, stripe uint64, body []byte) uint32 {
	var k [16]byte
	binary.BigEndian.PutUint64(k[:], uint64(ino))
	binary.BigEndian.PutUint64(k[8:], stripe)
	return crc32.Update(crc32.Checksum(k[:], castagnoli), castagnoli, body)
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// decodeStripe decodes the record of stripe of file ino in format 1, 2 or
// 3, checking format 3's checksum.
func decodeStripe(ino Ino, stripe uint64, b []byte) (storedStripe, error) {
	var s storedStripe
	s.Stripe = stripe
	// what names the record in errors (made only for one).
	what := func() string { return fmt.Sprintf("stripe %d of inode %d", stripe, ino) }
	if len(b) > 0 && b[0] == codecV3 {
		if len(b) < 5 {
			return s, fmt.Errorf("%s: short record: %w", what(), ErrCorrupt)
		}
		body := b[:len(b)-4]
		if binary.BigEndian.Uint32(b[len(body):]) != stripeCRC(ino, stripe, body) {
			return s, fmt.Errorf("%s: checksum mismatch (damaged record): %w", what(), ErrCorrupt)
		}
		b = body
	}
	d := dec{b: b}
	v := d.byte1()
	if d.err == nil && v != codecV1 && v != codecV2 && v != codecV3 {
		d.fail("format version")
	}
	s.Gen = d.u64()
	s.PG = d.u32()
	s.Len = d.u32()
	s.ShardSize = d.u32()
	s.Pool = d.u32()
	s.Drives = d.u32s(MaxDrives)
	if v == codecV2 || v == codecV3 {
		s.K = int(d.uv(MaxDrives))
		if d.err == nil && (s.K < 1 && v == codecV2 || s.K > len(s.Drives)) {
			d.fail("stripe data fragment count")
		}
	}
	return s, d.endLazy(what)
}

func encodeGC(g *GCItem) []byte {
	e := enc{b: make([]byte, 0, 32+5*len(g.Drives))}
	e.byte1(codecV1)
	e.uv(uint64(g.Ino))
	e.uv(g.Stripe)
	e.uv(g.Gen)
	e.uv(uint64(g.ShardSize))
	e.u32s(g.Drives)
	return e.b
}

func decodeGC(seq uint64, b []byte) (GCItem, error) {
	d := dec{b: b}
	g := GCItem{Seq: seq}
	d.version()
	g.Ino = Ino(d.u64())
	g.Stripe = d.u64()
	g.Gen = d.u64()
	g.ShardSize = d.u32()
	g.Drives = d.u32s(MaxDrives)
	return g, d.end(fmt.Sprintf("gc item %d", seq))
}

// Event strings are bounded so that one bad caller cannot bloat the log.
const maxEventField = 64 << 10

func encodeEvent(ev *Event) []byte {
	e := enc{b: make([]byte, 0, 24+len(ev.Kind)+len(ev.Subject)+len(ev.Message))}
	e.byte1(codecV1)
	e.sv(ev.Time)
	e.sv(ev.Duration)
	e.str(ev.Kind)
	e.str(ev.Subject)
	e.str(ev.Message)
	return e.b
}

func decodeEvent(seq uint64, b []byte) (Event, error) {
	d := dec{b: b}
	ev := Event{Seq: seq}
	d.version()
	ev.Time = d.sv()
	ev.Duration = d.sv()
	ev.Kind = d.str(maxEventField)
	ev.Subject = d.str(maxEventField)
	ev.Message = d.str(maxEventField)
	return ev, d.end(fmt.Sprintf("event %d", seq))
}

// Counters are 8 bytes big-endian; signed counters store int64 bits.

func encodeU64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

func decodeU64(b []byte) (uint64, error) {
	if len(b) != 8 {
		return 0, fmt.Errorf("counter of %d bytes: %w", len(b), ErrCorrupt)
	}
	return binary.BigEndian.Uint64(b), nil
}

// Blobs are version (8 bytes big-endian) then the data.

func encodeBlob(version uint64, data []byte) []byte {
	return append(binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(data)), version), data...)
}

func decodeBlob(b []byte) (uint64, []byte, error) {
	if len(b) < 8 {
		return 0, nil, fmt.Errorf("blob of %d bytes: %w", len(b), ErrCorrupt)
	}
	return binary.BigEndian.Uint64(b), b[8:], nil
}
