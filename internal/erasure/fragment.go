package erasure

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

const (
	// BlockSize is the unit of data checksumming: every BlockSize bytes of
	// a shard carry their own CRC32C (the last block may be short).
	BlockSize = 64 << 10

	// Version is the fragment format version written and accepted.
	Version = 1

	// MaxHeaderSize is HeaderSize(MaxShardSize). Every fragment is at least
	// this long, so reading the first MaxHeaderSize bytes of any fragment
	// always yields a whole header.
	MaxHeaderSize = 8192
)

const magic = "PFSF"

// Byte offsets of the fixed part of the header (see doc.go).
const (
	offMagic    = 0
	offVersion  = 4
	offFlags    = 6
	offIno      = 8
	offStripe   = 16
	offGen      = 24
	offIndex    = 32
	offK        = 33
	offM        = 34
	offReserved = 35
	offPool     = 36
	offLen      = 40
	offShard    = 44
	offBlock    = 48
	offNBlocks  = 52
	fixedSize   = 56
)

// castagnoli is the CRC32C table; crc32 treats it as read-only and uses the
// SSE4.2/ARMv8 instructions for it.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Header is the decoded header of a fragment.
type Header struct {
	Key       FragmentKey
	K, M      int    // scheme of the stripe
	Pool      uint32 // pool the stripe belongs to
	StripeLen uint32 // user bytes L in the stripe, 1 <= L <= K*ShardSize
	ShardSize uint32 // S, bytes of shard data in the fragment
	CRCs      []uint32
}

// numBlocks returns the number of checksummed blocks of a shard of size S.
func numBlocks(S int) int { return (S + BlockSize - 1) / BlockSize }

// headerLen is the number of meaningful header bytes, header CRC included.
func headerLen(S int) int { return fixedSize + 4*numBlocks(S) + 4 }

// HeaderSize returns the size of the header of a fragment with shard size S:
// the fixed part, the block CRCs and the header CRC, rounded up to Align.
func HeaderSize(shardSize int) int { return roundUp(headerLen(shardSize), Align) }

// FragmentSize returns the size of a whole fragment with shard size S: the
// header followed by the shard data padded to a multiple of Align.
func FragmentSize(shardSize int) int { return HeaderSize(shardSize) + roundUp(shardSize, Align) }

// FragmentShard returns the data region buf[HeaderSize(S):HeaderSize(S)+S]
// of a fragment buffer, where callers place (or reconstruct) the shard before
// SealFragment.
func FragmentShard(buf []byte, shardSize int) []byte {
	h := HeaderSize(shardSize)
	return buf[h : h+shardSize : h+shardSize]
}

// Validate checks the fields of h other than CRCs for consistency.
func (h *Header) Validate() error {
	S, L := int(h.ShardSize), int(h.StripeLen)
	switch {
	case h.K < 1 || h.M < 0 || h.K+h.M > MaxShards:
		return fmt.Errorf("fragment %v: invalid scheme %d+%d", h.Key, h.K, h.M)
	case int(h.Key.Index) >= h.K+h.M:
		return fmt.Errorf("fragment %v: index %d out of range for scheme %d+%d", h.Key, h.Key.Index, h.K, h.M)
	case S < 1 || S > MaxShardSize:
		return fmt.Errorf("fragment %v: shard size %d out of range [1, %d]", h.Key, S, MaxShardSize)
	case L < 1 || L > h.K*S:
		return fmt.Errorf("fragment %v: stripe length %d out of range [1, %d*%d]", h.Key, L, h.K, S)
	}
	return nil
}

// EncodeFragment builds a whole fragment for shard with header h (h.CRCs is
// ignored and computed; h.ShardSize, if 0, is taken from len(shard)) and
// returns it. dst is reused if its capacity is at least FragmentSize(S);
// shard may already sit at FragmentShard(dst, S). EncodeFragment panics if
// h is invalid or len(shard) != h.ShardSize: headers are built by trusted
// code; use Validate first on anything else.
func EncodeFragment(dst []byte, h Header, shard []byte) []byte {
	if h.ShardSize == 0 {
		h.ShardSize = uint32(len(shard))
	}
	if len(shard) != int(h.ShardSize) {
		panic(fmt.Sprintf("erasure: EncodeFragment %v: shard of %d bytes, header says %d", h.Key, len(shard), h.ShardSize))
	}
	n := FragmentSize(len(shard))
	if cap(dst) < n {
		dst = AlignedBuffer(n)
	}
	dst = dst[:n]
	copy(FragmentShard(dst, len(shard)), shard)
	SealFragment(dst, h)
	return dst
}

// SealFragment is the zero-copy EncodeFragment: the shard data already sits
// at FragmentShard(buf, S) with S = h.ShardSize. It computes the block CRCs,
// writes the header into buf[:HeaderSize(S)], zeroes the data padding and
// returns h with CRCs set (in a new slice; h.CRCs is not written). buf must
// be at least FragmentSize(S) long. It panics if h is invalid.
func SealFragment(buf []byte, h Header) Header {
	if err := h.Validate(); err != nil {
		panic("erasure: SealFragment: " + err.Error())
	}
	S := int(h.ShardSize)
	hs, n := HeaderSize(S), FragmentSize(S)
	if len(buf) < n {
		panic(fmt.Sprintf("erasure: SealFragment %v: buffer of %d bytes, need %d", h.Key, len(buf), n))
	}
	data := buf[hs : hs+S]
	h.CRCs = make([]uint32, 0, numBlocks(S))
	for off := 0; off < S; off += BlockSize {
		h.CRCs = append(h.CRCs, crc32.Checksum(data[off:min(off+BlockSize, S)], castagnoli))
	}
	clear(buf[hs+S : n])
	putHeader(buf[:hs], &h)
	return h
}

// SealCopy seals buf as SealFragment does when its shard holds byte for
// byte the shard of a fragment already sealed with header src (the copies
// of a mirror, k = 1, whose parity shards are the data shard): it writes h
// with src's block checksums instead of computing them again, and returns
// h with CRCs set (src's slice, shared). The caller guarantees the shards
// are equal; a read checks the copy against its checksums as any
// fragment. It panics if h is invalid or src is of another shard size.
func SealCopy(buf []byte, h Header, src Header) Header {
	if err := h.Validate(); err != nil {
		panic("erasure: SealCopy: " + err.Error())
	}
	S := int(h.ShardSize)
	hs, n := HeaderSize(S), FragmentSize(S)
	if len(buf) < n || src.ShardSize != h.ShardSize || len(src.CRCs) != numBlocks(S) {
		panic(fmt.Sprintf("erasure: SealCopy %v: buffer of %d bytes (need %d), source shard %d with %d checksums, shard %d",
			h.Key, len(buf), n, src.ShardSize, len(src.CRCs), S))
	}
	h.CRCs = src.CRCs
	clear(buf[hs+S : n])
	putHeader(buf[:hs], &h)
	return h
}

// putHeader writes h (with len(h.CRCs) == numBlocks(S)) into b, which is
// exactly HeaderSize(S) long, padding included.
func putHeader(b []byte, h *Header) {
	le := binary.LittleEndian
	copy(b[offMagic:], magic)
	le.PutUint16(b[offVersion:], Version)
	le.PutUint16(b[offFlags:], 0)
	le.PutUint64(b[offIno:], h.Key.Ino)
	le.PutUint64(b[offStripe:], h.Key.Stripe)
	le.PutUint64(b[offGen:], h.Key.Gen)
	b[offIndex] = h.Key.Index
	b[offK] = byte(h.K)
	b[offM] = byte(h.M)
	b[offReserved] = 0
	le.PutUint32(b[offPool:], h.Pool)
	le.PutUint32(b[offLen:], h.StripeLen)
	le.PutUint32(b[offShard:], h.ShardSize)
	le.PutUint32(b[offBlock:], BlockSize)
	le.PutUint32(b[offNBlocks:], uint32(len(h.CRCs)))
	p := fixedSize
	for _, c := range h.CRCs {
		le.PutUint32(b[p:], c)
		p += 4
	}
	le.PutUint32(b[p:], crc32.Checksum(b[:p], castagnoli))
	clear(b[p+4:])
}

// DecodeHeader decodes and validates the header at the start of b, which
// must hold at least HeaderSize(S) bytes (reading MaxHeaderSize bytes always
// suffices). Sizes are checked before use and the header CRC is verified, so
// arbitrary input yields an error, never a panic or a large allocation. The
// header padding is not checked. Errors wrap ErrCorrupt.
func DecodeHeader(b []byte) (Header, error) {
	var h Header
	le := binary.LittleEndian
	if len(b) < fixedSize {
		return h, corruptf("truncated: %d bytes, header needs at least %d", len(b), fixedSize)
	}
	if string(b[offMagic:offMagic+4]) != magic {
		return h, corruptf("bad magic %q", b[offMagic:offMagic+4])
	}
	if v := le.Uint16(b[offVersion:]); v != Version {
		return h, corruptf("unsupported version %d (want %d)", v, Version)
	}
	if f := le.Uint16(b[offFlags:]); f != 0 {
		return h, corruptf("unknown flags %#x", f)
	}
	if r := b[offReserved]; r != 0 {
		return h, corruptf("reserved byte is %#x", r)
	}
	S := le.Uint32(b[offShard:])
	if S < 1 || S > MaxShardSize {
		return h, corruptf("shard size %d out of range [1, %d]", S, MaxShardSize)
	}
	if bs := le.Uint32(b[offBlock:]); bs != BlockSize {
		return h, corruptf("block size %d (want %d)", bs, BlockSize)
	}
	nb := le.Uint32(b[offNBlocks:])
	if int64(nb) != int64(numBlocks(int(S))) {
		return h, corruptf("%d blocks for shard size %d (want %d)", nb, S, numBlocks(int(S)))
	}
	if hs := HeaderSize(int(S)); len(b) < hs {
		return h, corruptf("truncated: %d bytes, header of shard size %d needs %d", len(b), S, hs)
	}
	p := fixedSize + 4*int(nb)
	if got, want := crc32.Checksum(b[:p], castagnoli), le.Uint32(b[p:]); got != want {
		return h, corruptf("header checksum %#08x, stored %#08x", got, want)
	}
	h = Header{
		Key: FragmentKey{
			Ino:    le.Uint64(b[offIno:]),
			Stripe: le.Uint64(b[offStripe:]),
			Gen:    le.Uint64(b[offGen:]),
			Index:  b[offIndex],
		},
		K:         int(b[offK]),
		M:         int(b[offM]),
		Pool:      le.Uint32(b[offPool:]),
		StripeLen: le.Uint32(b[offLen:]),
		ShardSize: S,
		CRCs:      make([]uint32, nb),
	}
	if err := h.Validate(); err != nil {
		return Header{}, corruptf("%v", err)
	}
	for i := range h.CRCs {
		h.CRCs[i] = le.Uint32(b[fixedSize+4*i:])
	}
	return h, nil
}

// DecodeFragment decodes a whole fragment: the header, then the shard data
// (len S, aliasing b) with every block CRC checked. b must hold at least
// HeaderSize(S)+S bytes; the data padding is not checked. Header problems
// return an error wrapping ErrCorrupt. Bad data blocks return the header, the
// data and a *ChecksumError (wrapping ErrChecksum) naming the blocks, so a
// caller can still use the good blocks.
func DecodeFragment(b []byte) (Header, []byte, error) {
	h, err := DecodeHeader(b)
	if err != nil {
		return Header{}, nil, err
	}
	S := int(h.ShardSize)
	hs := HeaderSize(S)
	if len(b) < hs+S {
		return Header{}, nil, corruptf("fragment %v truncated: %d bytes, need %d", h.Key, len(b), hs+S)
	}
	data := b[hs : hs+S : hs+S]
	if bad := h.VerifyData(data, 0); len(bad) > 0 {
		return h, data, &ChecksumError{Key: h.Key, Blocks: bad}
	}
	return h, data, nil
}

// VerifyData checks the CRCs of shard data read from shard offset off and
// returns the indices of the blocks that fail. off must be a multiple of
// BlockSize within the shard; data should cover whole blocks (the last block
// of the shard may be short). A block that data covers only in part cannot be
// checked and is reported bad; bytes past the end of the shard (padding) are
// ignored. VerifyData panics if off is misaligned or beyond the shard.
func (h *Header) VerifyData(data []byte, off int) (bad []int) {
	S := int(h.ShardSize)
	if off < 0 || off%BlockSize != 0 || off > S {
		panic(fmt.Sprintf("erasure: VerifyData %v: offset %d not a block boundary within shard size %d", h.Key, off, S))
	}
	data = data[:min(len(data), S-off)]
	for b := off / BlockSize; len(data) > 0; b++ {
		n := min(BlockSize, S-b*BlockSize)
		if len(data) < n || b >= len(h.CRCs) || crc32.Checksum(data[:n], castagnoli) != h.CRCs[b] {
			bad = append(bad, b)
		}
		data = data[min(n, len(data)):]
	}
	return bad
}

// BlockExtent returns the shard byte range [start, end) to read so that the
// range [off, off+n) of the shard can be checked by VerifyData: off rounded
// down and off+n rounded up to block boundaries, capped at the shard size.
// It assumes 0 <= off and n >= 0; ranges beyond the shard end at the shard.
func (h *Header) BlockExtent(off, n int) (start, end int) {
	end = min(roundUp(off+n, BlockSize), int(h.ShardSize))
	start = min(off/BlockSize*BlockSize, end)
	return start, end
}
