// Package crc32c combines CRC-32C (Castagnoli) checksums: the checksum of
// a concatenation A‖B from the checksums of A and B and the length of B,
// without reading the bytes again (the method of zlib's crc32_combine:
// multiplying by x^(8·len(B)) modulo the polynomial).
//
// Invariant: Combine(Checksum(a), Checksum(b), len(b)) == Checksum(a‖b)
// for all a and b, hash/crc32's Castagnoli checksums (pre- and
// post-inverted), and Combine of a Checksum with Update's result for a
// continuation likewise (crc32c_test.go checks both on random inputs).
package crc32c

import "hash/crc32"

// poly is the Castagnoli polynomial, reflected (hash/crc32.Castagnoli).
const poly = crc32.Castagnoli

// x2n[k] is x^(2^k) modulo poly, reflected.
var x2n = func() (t [32]uint32) {
	p := uint32(1) << 30 // x^1
	t[0] = p
	for k := 1; k < 32; k++ {
		p = mulmod(p, p)
		t[k] = p
	}
	return t
}()

// mulmod returns a·b modulo poly (reflected bit order: x^0 is bit 31).
func mulmod(a, b uint32) uint32 {
	var p uint32
	for m := uint32(1) << 31; m != 0; m >>= 1 {
		if a&m != 0 {
			p ^= b
		}
		if b&1 != 0 {
			b = b>>1 ^ poly
		} else {
			b >>= 1
		}
	}
	return p
}

// xPow8n returns x^(8n) modulo poly: shifting a checksum past n bytes.
func xPow8n(n int64) uint32 {
	p := uint32(1) << 31 // x^0
	for k := 3; n != 0; n, k = n>>1, k+1 {
		if n&1 != 0 {
			p = mulmod(x2n[k&31], p)
		}
	}
	return p
}

// Combine returns the CRC-32C of A‖B given crcA, the CRC-32C of A, and
// crcB, that of B, of lenB bytes.
func Combine(crcA, crcB uint32, lenB int64) uint32 {
	return mulmod(xPow8n(lenB), crcA) ^ crcB
}

// Shifter combines with checksums of blocks of one length, the shift
// computed once.
type Shifter uint32

// ShiftFor returns the Shifter for blocks of n bytes.
func ShiftFor(n int64) Shifter { return Shifter(xPow8n(n)) }

// Combine is crc32c.Combine(crcA, crcB, n) for the n of s.
func (s Shifter) Combine(crcA, crcB uint32) uint32 { return mulmod(uint32(s), crcA) ^ crcB }
