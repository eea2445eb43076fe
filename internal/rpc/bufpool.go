package rpc

import (
	"math/bits"
	"sync"
)

// Body buffers are pooled by power-of-two size class, 4 KiB to 64 MiB.
// Larger bodies are allocated and left to the garbage collector.
const (
	minClassShift = 12
	maxClassShift = 26
)

type bufPool struct {
	classes [maxClassShift - minClassShift + 1]sync.Pool // of *[]byte
}

// get returns a buffer of length n and, if it came from (and may go back to)
// the pool, its handle for put. The contents are not zeroed.
func (p *bufPool) get(n int) (handle *[]byte, buf []byte) {
	if n == 0 {
		return nil, nil
	}
	shift := max(bits.Len(uint(n-1)), minClassShift)
	if shift > maxClassShift {
		return nil, make([]byte, n)
	}
	c := &p.classes[shift-minClassShift]
	if v, ok := c.Get().(*[]byte); ok {
		return v, (*v)[:n]
	}
	b := make([]byte, 1<<shift)
	return &b, b[:n]
}

// put returns a buffer obtained from get. The caller must not use it again.
func (p *bufPool) put(handle *[]byte) {
	if handle == nil {
		return
	}
	shift := bits.Len(uint(cap(*handle) - 1))
	p.classes[shift-minClassShift].Put(handle)
}
