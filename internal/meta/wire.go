package meta

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Attributes on the wire. The metadata service answers its hottest calls
// (lookup, getattr, create, unlink) with attributes in the compact inode
// encoding instead of JSON: an inode number, then the length and bytes of
// the inode record (codec.go; Parent is not sent).

// AppendAttr appends the wire encoding of a to b and returns the result.
func AppendAttr(b []byte, a Attr) []byte {
	n := inode{Attr: a}
	if a.Type == TypeFile || a.Stored != 0 {
		n.clean = storedCounted // Stored as the sender knows it
	}
	b = binary.AppendUvarint(b, uint64(a.Ino))
	rec := appendInode(nil, &n)
	b = binary.AppendUvarint(b, uint64(len(rec)))
	return append(b, rec...)
}

// DecodeAttr decodes one attribute record from the start of b and returns
// it with the bytes after it. Errors: ErrCorrupt.
func DecodeAttr(b []byte) (Attr, []byte, error) {
	ino, n := binary.Uvarint(b)
	if n <= 0 {
		return Attr{}, nil, fmt.Errorf("decode attr: inode number: %w", ErrCorrupt)
	}
	b = b[n:]
	l, n := binary.Uvarint(b)
	if n <= 0 || l > math.MaxInt32 || uint64(len(b)-n) < l {
		return Attr{}, nil, fmt.Errorf("decode attr: length: %w", ErrCorrupt)
	}
	b = b[n:]
	in, err := decodeInode(Ino(ino), b[:l])
	if err != nil {
		return Attr{}, nil, err
	}
	if in.Parent != 0 {
		return Attr{}, nil, fmt.Errorf("decode attr: parent on the wire: %w", ErrCorrupt)
	}
	return in.Attr, b[l:], nil
}
