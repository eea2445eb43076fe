package chunkstore

import (
	"encoding/binary"
	"errors"
	"hash/crc32"

	"poolfs/internal/crc32c"
	"poolfs/internal/erasure"
)

// Segment file format (see doc.go). All integers are little-endian; every
// block is Align bytes; every CRC is CRC32C seeded with the segment's
// random salt, so bytes a user stored as fragment data can never pass for
// a record header, an index or a trailer.
//
//	block 0        segment header: magic "PFSG", version, id, salt
//	records        header block (magic "PFSR") + data, back to back
//	sealed only:   index entries (indexEntrySize each), then a trailer
//	               block (magic "PFST") as the last block of the file

const (
	segMagic     = "PFSG"
	recMagic     = "PFSR"
	trailerMagic = "PFST"
	segVersion   = 1
	saltSize     = 16

	// Record header: magic 0, version 4, kind 6, index 7, ino 8, stripe
	// 16, gen 24, length 32, seq 40, mtime 48, segment 56, data CRC 64,
	// header CRC 68.
	recHeaderLen = 72
	kindFragment = 1

	// Segment header: magic 0, version 4, id 8, salt 16, CRC 32.
	segHeaderLen = 36

	// Trailer: magic 0, version 4, id 8, index offset 16, entries 24,
	// index CRC 32, CRC 36.
	trailerLen = 40

	// Index entry: offset 0, ino 8, stripe 16, gen 24, length 32, seq 40,
	// mtime 48, index 56 (7 bytes reserved).
	indexEntrySize = 64
)

var errBadRecord = errors.New("chunkstore: bad segment record")

// record is a decoded record header, or an index entry.
type record struct {
	key    erasure.FragmentKey
	off    int64 // offset of the header block in the segment file
	length int64 // data bytes, a positive multiple of Align
	seq    uint64
	mtime  int64 // unix nanoseconds
	seg    uint64
	crc    uint32 // CRC32C of the data (seeded with the salt)
}

// end is the offset just past the record's data.
func (r *record) end() int64 { return r.off + Align + r.length }

func saltedCRC(salt *[saltSize]byte, b []byte) uint32 {
	return crc32.Update(crc32.Update(0, castagnoli, salt[:]), castagnoli, b)
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// dataCRC returns saltedCRC(salt, frag), a record's data checksum. A
// sealed erasure fragment (erasure.SealFragment: what clients, rebuild and
// scrub write) carries in its header the CRC-32C of each 64 KiB block of
// its shard, which its writer computed a moment before: the record's
// checksum is combined from them and from the header and the padding
// (package crc32c), so the write path does not read the shard a second
// time (it was 4% of the CPU of random 4 KiB writes). A shard whose bytes
// differ from its header's checksums makes the record fail its check when
// an unsealed segment is scanned, as a torn record does; the fragment
// fails every read's check anyway.
func dataCRC(salt *[saltSize]byte, frag []byte) uint32 {
	h, err := erasure.DecodeHeader(frag)
	S := int(h.ShardSize)
	if err != nil || len(frag) != erasure.FragmentSize(S) { // DecodeHeader checked the CRCs' count
		return saltedCRC(salt, frag)
	}
	hs := erasure.HeaderSize(S)
	c := saltedCRC(salt, frag[:hs])
	for i, bc := range h.CRCs {
		if n := min(erasure.BlockSize, S-i*erasure.BlockSize); n == erasure.BlockSize {
			c = blockShift.Combine(c, bc)
		} else {
			c = crc32c.Combine(c, bc, int64(n))
		}
	}
	return crc32.Update(c, castagnoli, frag[hs+S:])
}

// blockShift combines the checksum of a whole erasure block.
var blockShift = crc32c.ShiftFor(erasure.BlockSize)

// encodeRecordHeader fills the header block hdr (Align bytes) for r.
func encodeRecordHeader(hdr []byte, salt *[saltSize]byte, r *record) {
	clear(hdr[:Align])
	copy(hdr, recMagic)
	le := binary.LittleEndian
	le.PutUint16(hdr[4:], segVersion)
	hdr[6] = kindFragment
	hdr[7] = r.key.Index
	le.PutUint64(hdr[8:], r.key.Ino)
	le.PutUint64(hdr[16:], r.key.Stripe)
	le.PutUint64(hdr[24:], r.key.Gen)
	le.PutUint64(hdr[32:], uint64(r.length))
	le.PutUint64(hdr[40:], r.seq)
	le.PutUint64(hdr[48:], uint64(r.mtime))
	le.PutUint64(hdr[56:], r.seg)
	le.PutUint32(hdr[64:], r.crc)
	le.PutUint32(hdr[68:], saltedCRC(salt, hdr[:68]))
}

// decodeRecordHeader decodes the header block of the record at off of
// segment seg. It checks magic, version, kind, CRC, segment and length
// (aligned, positive, at most maxLen) and never panics.
func decodeRecordHeader(hdr []byte, salt *[saltSize]byte, seg uint64, off, maxLen int64) (record, error) {
	var r record
	if len(hdr) < recHeaderLen || string(hdr[:4]) != recMagic {
		return r, errBadRecord
	}
	le := binary.LittleEndian
	if le.Uint32(hdr[68:]) != saltedCRC(salt, hdr[:68]) {
		return r, errBadRecord
	}
	if le.Uint16(hdr[4:]) != segVersion || hdr[6] != kindFragment {
		return r, errBadRecord
	}
	r = record{
		key: erasure.FragmentKey{Ino: le.Uint64(hdr[8:]), Stripe: le.Uint64(hdr[16:]),
			Gen: le.Uint64(hdr[24:]), Index: hdr[7]},
		off:   off,
		seq:   le.Uint64(hdr[40:]),
		mtime: int64(le.Uint64(hdr[48:])),
		seg:   le.Uint64(hdr[56:]),
		crc:   le.Uint32(hdr[64:]),
	}
	n := le.Uint64(hdr[32:])
	if r.seg != seg || n == 0 || n%Align != 0 || n > uint64(maxLen) {
		return record{}, errBadRecord
	}
	r.length = int64(n)
	return r, nil
}

// encodeSegmentHeader fills block 0 of a segment.
func encodeSegmentHeader(b []byte, id uint64, salt *[saltSize]byte) {
	clear(b[:Align])
	copy(b, segMagic)
	le := binary.LittleEndian
	le.PutUint16(b[4:], segVersion)
	le.PutUint64(b[8:], id)
	copy(b[16:], salt[:])
	le.PutUint32(b[32:], crc32.Checksum(b[:32], castagnoli))
}

// decodeSegmentHeader returns the salt of segment id from block 0.
func decodeSegmentHeader(b []byte, id uint64) (salt [saltSize]byte, err error) {
	le := binary.LittleEndian
	if len(b) < segHeaderLen || string(b[:4]) != segMagic || le.Uint16(b[4:]) != segVersion ||
		le.Uint64(b[8:]) != id || le.Uint32(b[32:]) != crc32.Checksum(b[:32], castagnoli) {
		return salt, errBadRecord
	}
	copy(salt[:], b[16:32])
	return salt, nil
}

// encodeIndex returns the index entries of recs followed by the trailer
// block, to be written at indexOff; the result is a multiple of Align
// long and Align-aligned in memory.
func encodeIndex(recs []record, salt *[saltSize]byte, id uint64, indexOff int64) []byte {
	n := roundUp(len(recs)*indexEntrySize, Align)
	b := AlignedBuffer(n + Align)
	le := binary.LittleEndian
	for i, r := range recs {
		e := b[i*indexEntrySize:]
		le.PutUint64(e[0:], uint64(r.off))
		le.PutUint64(e[8:], r.key.Ino)
		le.PutUint64(e[16:], r.key.Stripe)
		le.PutUint64(e[24:], r.key.Gen)
		le.PutUint64(e[32:], uint64(r.length))
		le.PutUint64(e[40:], r.seq)
		le.PutUint64(e[48:], uint64(r.mtime))
		e[56] = r.key.Index
	}
	t := b[n:]
	copy(t, trailerMagic)
	le.PutUint16(t[4:], segVersion)
	le.PutUint64(t[8:], id)
	le.PutUint64(t[16:], uint64(indexOff))
	le.PutUint64(t[24:], uint64(len(recs)))
	le.PutUint32(t[32:], saltedCRC(salt, b[:len(recs)*indexEntrySize]))
	le.PutUint32(t[36:], saltedCRC(salt, t[:36]))
	return b
}

// decodeTrailer checks the last block of a segment of size bytes and
// returns where its index starts and how many entries it has.
func decodeTrailer(t []byte, salt *[saltSize]byte, id uint64, size int64) (indexOff int64, n int, crc uint32, err error) {
	le := binary.LittleEndian
	if len(t) < trailerLen || string(t[:4]) != trailerMagic || le.Uint32(t[36:]) != saltedCRC(salt, t[:36]) ||
		le.Uint16(t[4:]) != segVersion || le.Uint64(t[8:]) != id {
		return 0, 0, 0, errBadRecord
	}
	off, cnt := le.Uint64(t[16:]), le.Uint64(t[24:])
	trailerOff := uint64(size - Align)
	if off < Align || off%Align != 0 || off > trailerOff || cnt > (trailerOff-off)/indexEntrySize ||
		uint64(roundUp(int(cnt)*indexEntrySize, Align)) != trailerOff-off {
		return 0, 0, 0, errBadRecord
	}
	return int64(off), int(cnt), le.Uint32(t[32:]), nil
}

// decodeIndex decodes n entries of a sealed segment whose records lie in
// [Align, indexOff). It checks the CRC and every entry's bounds and never
// panics.
func decodeIndex(b []byte, salt *[saltSize]byte, id uint64, n int, crc uint32, indexOff int64) ([]record, error) {
	if len(b) < n*indexEntrySize || saltedCRC(salt, b[:n*indexEntrySize]) != crc {
		return nil, errBadRecord
	}
	le := binary.LittleEndian
	recs := make([]record, n)
	for i := range recs {
		e := b[i*indexEntrySize:]
		r := record{
			off: int64(le.Uint64(e[0:])),
			key: erasure.FragmentKey{Ino: le.Uint64(e[8:]), Stripe: le.Uint64(e[16:]),
				Gen: le.Uint64(e[24:]), Index: e[56]},
			seq:   le.Uint64(e[40:]),
			mtime: int64(le.Uint64(e[48:])),
			seg:   id,
		}
		length := le.Uint64(e[32:])
		if r.off < Align || r.off%Align != 0 || r.off >= indexOff || length == 0 || length%Align != 0 ||
			length > uint64(indexOff-r.off-Align) {
			return nil, errBadRecord
		}
		r.length = int64(length)
		recs[i] = r
	}
	return recs, nil
}

func roundUp(n, a int) int { return (n + a - 1) / a * a }

func crc32Seed(salt *[saltSize]byte) uint32 { return crc32.Update(0, castagnoli, salt[:]) }

func crc32Update(crc uint32, b []byte) uint32 { return crc32.Update(crc, castagnoli, b) }
