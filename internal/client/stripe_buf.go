package client

import (
	"sync"

	"poolfs/internal/erasure"
)

// stripeBuf holds the k+m fragments of one stripe, each in its own
// 4096-aligned buffer laid out as on disk: header, then the shard. User
// bytes are read straight into the data shards and parity is computed in
// place, so a stripe goes from the reader to the wire without a copy.
type stripeBuf struct {
	unit  int // largest shard the buffers hold
	frags [][]byte
}

// bufPool recycles stripe buffers of one geometry.
type bufPool struct {
	width, unit int
	pool        sync.Pool
}

func newBufPool(width, unit int) *bufPool {
	p := &bufPool{width: width, unit: unit}
	p.pool.New = func() any {
		b := &stripeBuf{unit: unit, frags: make([][]byte, width)}
		for i := range b.frags {
			b.frags[i] = erasure.AlignedBuffer(erasure.FragmentSize(unit))
		}
		return b
	}
	return p
}

func (p *bufPool) get() *stripeBuf  { return p.pool.Get().(*stripeBuf) }
func (p *bufPool) put(b *stripeBuf) { p.pool.Put(b) }

// shard returns shard i for shard size s.
func (b *stripeBuf) shard(i, s int) []byte {
	h := erasure.HeaderSize(s)
	return b.frags[i][h : h+s]
}

// shards returns all shards for shard size s.
func (b *stripeBuf) shards(s int) [][]byte {
	out := make([][]byte, len(b.frags))
	for i := range out {
		out[i] = b.shard(i, s)
	}
	return out
}

// frag returns the whole fragment i for shard size s.
func (b *stripeBuf) frag(i, s int) []byte {
	return b.frags[i][:erasure.FragmentSize(s)]
}

// relayout moves l user bytes that were read assuming full-unit shards into
// the layout of shard size s (used for a short last stripe), and zeroes
// every data shard beyond the user bytes it holds: a pooled buffer's
// earlier contents are never encoded or written.
func (b *stripeBuf) relayout(k, l, s int) {
	if s == b.unit {
		for i := 0; i < k; i++ {
			lo := i * s
			clear(b.shard(i, s)[min(max(l-lo, 0), s):])
		}
		return
	}
	if k == 1 {
		// One data shard (a small file's mirror): its bytes move within
		// the buffer (not at all when both shard sizes have the same
		// header size), with no copy through a flat buffer.
		sh := b.shard(0, s)
		n := copy(sh, b.shard(0, b.unit)[:l])
		clear(sh[n:])
		return
	}
	flat := make([]byte, l)
	for i, off := 0, 0; off < l; i++ {
		n := copy(flat[off:], b.shard(i, b.unit))
		off += n
	}
	for i := 0; i < k; i++ {
		sh := b.shard(i, s)
		lo := i * s
		n := 0
		if lo < l {
			n = copy(sh, flat[lo:])
		}
		clear(sh[n:])
	}
}

// pools holds one buffer pool per stripe geometry, shared by every file of
// a client, so steady I/O recycles buffers instead of allocating (and
// zeroing) ten megabytes a stripe.
type pools struct {
	mu sync.Mutex
	m  map[[2]int]*bufPool
}

func (p *pools) get(width, unit int) *bufPool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[[2]int]*bufPool{}
	}
	bp := p.m[[2]int{width, unit}]
	if bp == nil {
		bp = newBufPool(width, unit)
		p.m[[2]int{width, unit}] = bp
	}
	return bp
}
