package client

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"poolfs/internal/meta"
)

// TestLogCache: entries are served only for their file, log stripe and
// generation and within their bytes, whether swapped in (a full log
// stripe) or copied (a short one); the oldest leave first beyond the
// bound; a dropped entry is gone; and buffers of entries that left are
// filled again, never those of entries in the cache.
func TestLogCache(t *testing.T) {
	const k, unit = 2, 4096
	pool := newBufPool(k+1, unit)
	frag := len(pool.get().frags[0])
	lc := newLogCache(int64(3 * k * frag)) // three full log stripes
	rec := func(s, gen uint64) meta.StripeRec { return meta.StripeRec{Stripe: meta.LogStripeBase | s, Gen: gen} }
	// stripe returns a stripe buffer holding n random bytes in the
	// full-unit layout, and the bytes.
	stripe := func(n int) (*stripeBuf, []byte) {
		b, want := pool.get(), make([]byte, n)
		for i := range want {
			want[i] = byte(rand.Uint32())
		}
		for at := 0; at < n; at += unit {
			copy(b.shard(at/unit, unit), want[at:min(n, at+unit)])
		}
		return b, want
	}
	full := func(ino meta.Ino, r meta.StripeRec) []byte {
		b, want := stripe(k * unit)
		before := b.frags[0]
		lc.swap(ino, r, b, k, unit, k*unit)
		if &b.frags[0][0] == &before[0] {
			t.Fatal("swap left the stripe buffer its shard")
		}
		return want
	}
	got := func(ino meta.Ino, r meta.StripeRec, from, n int) []byte {
		dst := make([]byte, n)
		if !lc.read(ino, r, from, dst) {
			return nil
		}
		return dst
	}
	first := full(1, rec(1, 7))
	b, short := stripe(unit + 100)
	e := lc.copyOf(b, unit, unit+100)
	clear(b.shard(0, unit)) // writeStripe lays a short stripe out anew
	lc.put(1, rec(2, 7), e)
	third := full(2, rec(1, 7))
	if b := got(1, rec(1, 7), 100, unit); !bytes.Equal(b, first[100:100+unit]) {
		t.Fatal("bytes across the shards of a swapped log stripe differ")
	}
	if b := got(1, rec(2, 7), 0, unit+100); !bytes.Equal(b, short) {
		t.Fatal("the bytes of a copied log stripe differ")
	}
	for _, miss := range []struct {
		what    string
		ino     meta.Ino
		r       meta.StripeRec
		from, n int
	}{
		{"another generation", 1, rec(1, 8), 0, 10},
		{"another file", 3, rec(1, 7), 0, 10},
		{"another log stripe", 1, rec(3, 7), 0, 10},
		{"beyond its bytes", 1, rec(2, 7), unit, 101},
		{"before its bytes", 1, rec(1, 7), -1, 10},
	} {
		if got(miss.ino, miss.r, miss.from, miss.n) != nil {
			t.Errorf("%s served from the cache", miss.what)
		}
	}
	// A fourth pushes the oldest out; the buffers given to stripe
	// buffers are never those of entries in the cache.
	full(2, rec(2, 7))
	if got(1, rec(1, 7), 0, 1) != nil {
		t.Fatal("the oldest entry stayed beyond the bound")
	}
	if got(1, rec(2, 7), 0, 1) == nil || got(2, rec(2, 7), 0, 1) == nil {
		t.Fatal("a newer entry left before the oldest")
	}
	lc.drop(2, meta.LogStripeBase|2)
	if got(2, rec(2, 7), 0, 1) != nil {
		t.Fatal("a dropped entry is still served")
	}
	// The next swap gives the stripe buffer the dropped entry's
	// buffers; whatever the writer then puts in them, the entries in the
	// cache keep their bytes.
	dropped := map[*byte]bool{}
	for _, f := range lc.free[frag] {
		dropped[&f[0]] = true
	}
	if len(dropped) == 0 {
		t.Fatal("a dropped entry's buffers were not kept to fill again")
	}
	b, fifth := stripe(k * unit)
	lc.swap(3, rec(5, 1), b, k, unit, k*unit)
	for _, f := range b.frags[:k] {
		if !dropped[&f[0]] {
			t.Error("the stripe buffer got a new buffer while a dropped one was free")
		}
		for i := range f {
			f[i] = 0xee
		}
	}
	for _, c := range []struct {
		ino  meta.Ino
		r    meta.StripeRec
		want []byte
	}{{1, rec(2, 7), short}, {2, rec(1, 7), third}, {3, rec(5, 1), fifth}} {
		if b := got(c.ino, c.r, 0, len(c.want)); !bytes.Equal(b, c.want) {
			t.Errorf("entry %d/%#x changed when the stripe buffer was written", c.ino, c.r.Stripe)
		}
	}
	var none *logCache
	if none.takes(1) || none.read(1, rec(1, 7), 0, make([]byte, 1)) || none.size() != 0 {
		t.Fatal("a client without a log cache serves from one")
	}
	none.drop(1, 1)
}
