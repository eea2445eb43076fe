package client

import (
	"slices"
	"sort"

	"poolfs/internal/chunkstore"
)

// dirtyStripe holds the bytes a handle wrote into one stripe and where.
//
// Small writes are kept sparse: the bytes of each written range, beside
// the range (a few small writes anywhere in a stripe take what they
// wrote, not the stripe). Once the bytes would pass smallDirty, they move
// into a stripe buffer from the client's pool, laid out as the stripe's
// data shards of a full stripe, so that a stripe written whole (a
// sequential writer) is encoded and sent from where the writes put it,
// without another copy.
type dirtyStripe struct {
	parts [][]byte // bytes of spans[i], while small
	// partBufs, if set, is where the parts come from and go back to once
	// the stripe is done with them (the client's: a small file's bytes
	// then land in memory a previous file used, not in fresh pages).
	partBufs *chunkstore.Buffers
	sbuf     *stripeBuf // or the data shards (full-unit layout)
	spans    []span     // written ranges, sorted, merged
	// k and unit are the layout's, pool its stripe buffers; a nil pool
	// keeps the stripe sparse.
	k, unit int
	pool    *bufPool
	// held is the raw bytes this stripe holds in the client's spaceGate
	// (file_space.go).
	held uint64
}

type span struct{ a, b int }

// smallDirty is the most bytes a dirty stripe keeps sparse; beyond it it
// takes a stripe buffer from the pool.
const smallDirty = 256 << 10

// release returns the pooled buffers. The stripe must not be used again.
func (d *dirtyStripe) release() {
	if d.sbuf != nil {
		d.pool.put(d.sbuf)
		d.sbuf = nil
	}
	d.freeParts(d.parts)
	d.parts = nil
}

// newPart returns a buffer of n bytes (not zeroed) for a sparse range.
func (d *dirtyStripe) newPart(n int) []byte {
	if d.partBufs == nil {
		return make([]byte, n)
	}
	return d.partBufs.Get(n)
}

// freeParts hands back parts no range holds any more.
func (d *dirtyStripe) freeParts(parts [][]byte) {
	if d.partBufs == nil {
		return
	}
	for _, b := range parts {
		d.partBufs.Put(b)
	}
}

// small reports whether the stripe keeps its bytes sparse (no stripe
// buffer).
func (d *dirtyStripe) small() bool { return d.sbuf == nil }

func (d *dirtyStripe) write(at int, p []byte) {
	end := at + len(p)
	if d.sbuf == nil && d.bytes()+len(p) > smallDirty && d.pool != nil && end <= d.k*d.unit {
		d.sbuf = d.pool.get()
		for i, sp := range d.spans {
			d.copyIn(sp.a, d.parts[i])
		}
		d.freeParts(d.parts)
		d.parts = nil
	}
	if d.sbuf != nil {
		d.copyIn(at, p)
		d.spans = addSpan(d.spans, span{at, end})
		return
	}
	d.writeSparse(at, p)
}

// writeSparse adds p at at to the sparse ranges, merging the ranges it
// overlaps or touches into one.
func (d *dirtyStripe) writeSparse(at int, p []byte) {
	s := span{at, at + len(p)}
	first, last := -1, -1 // the spans s merges with
	for i, x := range d.spans {
		if x.b < s.a || x.a > s.b {
			continue
		}
		if first < 0 {
			first = i
		}
		last = i
	}
	if first < 0 {
		i := sort.Search(len(d.spans), func(i int) bool { return d.spans[i].a > s.a })
		d.spans = slices.Insert(d.spans, i, s)
		part := d.newPart(len(p))
		copy(part, p)
		d.parts = slices.Insert(d.parts, i, part)
		return
	}
	// The merged range is covered by the ranges and p: a part from the
	// pool, not zeroed, has no byte left unwritten.
	m := span{min(s.a, d.spans[first].a), max(s.b, d.spans[last].b)}
	buf := d.parts[first]
	var done [][]byte // parts merged into buf
	if m.a == d.spans[first].a && cap(buf) >= m.b-m.a {
		buf = buf[:m.b-m.a] // grows in place: appends within one range
	} else {
		nb := d.newPart(max(m.b-m.a, min(2*len(buf), smallDirty)))[:m.b-m.a]
		copy(nb[d.spans[first].a-m.a:], buf)
		done = append(done, buf)
		buf = nb
	}
	for i := first + 1; i <= last; i++ {
		copy(buf[d.spans[i].a-m.a:], d.parts[i])
		done = append(done, d.parts[i])
	}
	copy(buf[s.a-m.a:], p)
	d.spans = append(append(d.spans[:first], m), d.spans[last+1:]...)
	d.parts = append(append(d.parts[:first], buf), d.parts[last+1:]...)
	d.freeParts(done)
}

// copyIn copies p to stripe bytes [at, at+len(p)) of the shards.
func (d *dirtyStripe) copyIn(at int, p []byte) {
	for len(p) > 0 {
		sh := d.sbuf.shard(at/d.unit, d.unit)[at%d.unit:]
		n := copy(sh, p)
		p, at = p[n:], at+n
	}
}

// overlay copies the bytes the handle wrote over dst, which holds stripe
// bytes [at, at+len(dst)).
func (d *dirtyStripe) overlay(dst []byte, at int) {
	for i, sp := range d.spans {
		a, b := max(sp.a, at), min(sp.b, at+len(dst))
		if a >= b {
			continue
		}
		if d.sbuf == nil {
			copy(dst[a-at:b-at], d.parts[i][a-sp.a:b-sp.a])
			continue
		}
		for pos := a; pos < b; {
			sh := d.sbuf.shard(pos/d.unit, d.unit)
			n := copy(dst[pos-at:b-at], sh[pos%d.unit:])
			pos += n
		}
	}
}

// stage lays the stripe's first l bytes, l at most one unit, into shard 0
// of b in the full-unit layout: the handle's bytes, zeros between its
// ranges (nothing committed lies under them: a new stripe, or one the
// handle wrote whole). That is what fillShards puts there from a flat
// copy of the stripe, without the copy.
func (d *dirtyStripe) stage(b *stripeBuf, l int) {
	sh := b.shard(0, b.unit)[:l]
	if !d.covers(l) {
		clear(sh)
	}
	d.overlay(sh, 0)
}

// addSpan inserts s into sorted, merged spans.
func addSpan(spans []span, s span) []span {
	out := spans[:0:0]
	for _, x := range spans {
		if x.b < s.a || x.a > s.b {
			out = append(out, x)
			continue
		}
		s = span{min(s.a, x.a), max(s.b, x.b)}
	}
	out = append(out, s)
	sort.Slice(out, func(i, j int) bool { return out[i].a < out[j].a })
	return out
}

// end is the stripe-relative offset after the last byte written.
func (d *dirtyStripe) end() int {
	if len(d.spans) == 0 {
		return 0
	}
	return d.spans[len(d.spans)-1].b
}

// bytes is the number of bytes the spans cover.
func (d *dirtyStripe) bytes() int {
	n := 0
	for _, sp := range d.spans {
		n += sp.b - sp.a
	}
	return n
}

// covers reports whether the spans cover [0, n).
func (d *dirtyStripe) covers(n int) bool { return covering(d.spans, n) }

// coversWith reports whether the spans would cover [0, n) once s is
// written.
func (d *dirtyStripe) coversWith(s span, n int) bool { return covering(addSpan(d.spans, s), n) }

// covering reports whether sorted, merged spans cover [0, n).
func covering(spans []span, n int) bool {
	return len(spans) == 1 && spans[0].a == 0 && spans[0].b >= n
}
