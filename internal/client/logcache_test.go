package client

import (
	"bytes"
	"testing"

	"poolfs/internal/meta"
)

// TestLogCache: entries are served only for their file, log stripe and
// generation and within their bytes; the oldest leave first beyond the
// bound; a dropped entry is gone; and buffers of entries that left are
// filled again.
func TestLogCache(t *testing.T) {
	lc := newLogCache(3 << 10)
	rec := func(s, gen uint64) meta.StripeRec { return meta.StripeRec{Stripe: meta.LogStripeBase | s, Gen: gen} }
	put := func(ino meta.Ino, r meta.StripeRec, fill byte) []byte {
		b := lc.buffer(1 << 10)
		if b == nil {
			t.Fatal("a 1 KiB log stripe refused by a 3 KiB cache")
		}
		for i := range b {
			b[i] = fill + byte(i)
		}
		lc.put(ino, r, b)
		return b
	}
	got := func(ino meta.Ino, r meta.StripeRec, from, n int) []byte {
		dst := make([]byte, n)
		if !lc.read(ino, r, from, dst) {
			return nil
		}
		return dst
	}
	first := bytes.Clone(put(1, rec(1, 7), 10))
	put(1, rec(2, 7), 20)
	put(2, rec(1, 7), 30)
	if lc.size() != 3<<10 {
		t.Fatalf("size %d, want 3 KiB", lc.size())
	}
	if b := got(1, rec(1, 7), 100, 200); !bytes.Equal(b, first[100:300]) {
		t.Fatal("bytes 100..300 of a cached log stripe differ")
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
		{"beyond its bytes", 1, rec(1, 7), 1000, 100},
		{"before its bytes", 1, rec(1, 7), -1, 10},
	} {
		if got(miss.ino, miss.r, miss.from, miss.n) != nil {
			t.Errorf("%s served from the cache", miss.what)
		}
	}
	// A fourth entry pushes the oldest out, and reuses no buffer still
	// in the cache.
	fourth := put(2, rec(2, 7), 40)
	if got(1, rec(1, 7), 0, 1) != nil {
		t.Fatal("the oldest entry stayed beyond the bound")
	}
	if got(1, rec(2, 7), 0, 1) == nil || got(2, rec(2, 7), 0, 1) == nil {
		t.Fatal("a newer entry left before the oldest")
	}
	if lc.size() != 3<<10 {
		t.Fatalf("size %d after eviction, want 3 KiB", lc.size())
	}
	lc.drop(2, meta.LogStripeBase|2)
	if got(2, rec(2, 7), 0, 1) != nil || lc.size() != 2<<10 {
		t.Fatalf("a dropped entry is still served (size %d)", lc.size())
	}
	// The dropped entry's buffer is the next one filled; the bytes of
	// the entries in the cache stay as they were.
	if b := lc.buffer(1 << 10); &b[0] != &fourth[0] {
		t.Error("the buffer of a dropped entry was not used again")
	}
	if b := got(2, rec(1, 7), 0, 1<<10); b == nil || b[5] != 35 {
		t.Fatal("an entry's bytes changed")
	}
	if lc.buffer(4<<10) != nil {
		t.Fatal("a log stripe larger than the cache was taken")
	}
	var none *logCache
	if none.buffer(1) != nil || none.read(1, rec(1, 7), 0, make([]byte, 1)) || none.size() != 0 {
		t.Fatal("a client without a log cache serves from one")
	}
	none.drop(1, 1)
}
