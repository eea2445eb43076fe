package erasure

import "unsafe"

// AlignedBuffer returns a zeroed []byte of length and capacity n whose first
// byte is Align-aligned in memory, as O_DIRECT I/O requires. It allocates
// n+Align-1 bytes; the caller owns the result.
func AlignedBuffer(n int) []byte {
	if n == 0 {
		return []byte{}
	}
	b := make([]byte, n+Align-1)
	off := 0
	if r := int(uintptr(unsafe.Pointer(unsafe.SliceData(b))) & (Align - 1)); r != 0 {
		off = Align - r
	}
	return b[off : off+n : off+n]
}

// IsAligned reports whether b's first byte is Align-aligned in memory.
func IsAligned(b []byte) bool {
	return uintptr(unsafe.Pointer(unsafe.SliceData(b)))&(Align-1) == 0
}
