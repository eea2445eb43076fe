package bench

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrVerify is wrapped by every data verification failure.
var ErrVerify = errors.New("bench: data verification failed")

// pattern generates the bytes a task writes: the 8-byte little-endian word
// at file offset o (o a multiple of 8) is base ^ (o/8 * golden), where base
// mixes the seed, the iteration and the writing task. A byte therefore
// depends on who wrote it, when and where, so stale, misplaced or corrupted
// data is detected, and generating it costs a multiply per word.
type pattern struct{ base uint64 }

const golden = 0x9E3779B97F4A7C15

func newPattern(seed uint64, iter, writer int) pattern {
	return pattern{base: mix64(seed ^ mix64(uint64(iter)<<32|uint64(uint32(writer))))}
}

// mix64 is the splitmix64 finaliser.
func mix64(x uint64) uint64 {
	x += golden
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9
	x = (x ^ (x >> 27)) * 0x94D049BB133111EB
	return x ^ (x >> 31)
}

func (p pattern) word(w uint64) uint64 { return p.base ^ w*golden }

// fill writes the pattern for file offsets [off, off+len(b)) into b.
func (p pattern) fill(b []byte, off int64) {
	i := 0
	// Unaligned head, byte by byte.
	for ; i < len(b) && (off+int64(i))%8 != 0; i++ {
		b[i] = p.byteAt(off + int64(i))
	}
	w := uint64(off+int64(i)) / 8
	for ; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], p.word(w))
		w++
	}
	for ; i < len(b); i++ {
		b[i] = p.byteAt(off + int64(i))
	}
}

func (p pattern) byteAt(o int64) byte {
	return byte(p.word(uint64(o)/8) >> (8 * (uint64(o) % 8)))
}

// check compares b, read at file offset off, with the pattern, using
// scratch (at least len(b) long) for the expected bytes. It returns an
// error wrapping ErrVerify naming the first wrong byte's file offset.
func (p pattern) check(b, scratch []byte, off int64, file string) error {
	want := scratch[:len(b)]
	p.fill(want, off)
	if bytes.Equal(b, want) {
		return nil
	}
	for i := range b {
		if b[i] != want[i] {
			bad := 0
			for j := i; j < len(b); j++ {
				if b[j] != want[j] {
					bad++
				}
			}
			return fmt.Errorf("%w: %s offset %d: read 0x%02x, want 0x%02x (%d wrong bytes in the %d-byte transfer at offset %d)",
				ErrVerify, file, off+int64(i), b[i], want[i], bad, len(b), off)
		}
	}
	return nil
}
