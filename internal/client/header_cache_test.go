package client

import (
	"testing"

	"poolfs/internal/erasure"
)

func TestHeaderCache(t *testing.T) {
	const n = 256
	c := newHeaderCache(n)
	key := func(i int) erasure.FragmentKey {
		return erasure.FragmentKey{Ino: 7, Stripe: uint64(i / 10), Gen: 3, Index: uint8(i % 10)}
	}
	// Every header put is found, with its own value, while the cache holds
	// fewer than a shard's share.
	for i := range 10 {
		c.put(key(i), erasure.Header{Key: key(i), StripeLen: uint32(i + 1)})
	}
	for i := range 10 {
		h, ok := c.get(key(i))
		if !ok || h.Key != key(i) || h.StripeLen != uint32(i+1) {
			t.Fatalf("get %v = %+v, %v", key(i), h, ok)
		}
	}
	if _, ok := c.get(key(10)); ok {
		t.Fatal("a header never put was found")
	}
	// A second put of a key keeps the first value (keys name immutable bytes).
	c.put(key(0), erasure.Header{Key: key(0), StripeLen: 99})
	if h, _ := c.get(key(0)); h.StripeLen != 1 {
		t.Fatalf("second put replaced the header: %d", h.StripeLen)
	}
	// The fragments of one stripe spread over several shards.
	used := map[*headerShard]bool{}
	for i := range 10 {
		used[c.shard(key(i))] = true
	}
	if len(used) < 4 {
		t.Fatalf("the 10 fragments of a stripe fell in %d shards", len(used))
	}
	// Many more keys than the cache holds: it stays within its size, and
	// the most recent keys of each shard are the ones kept.
	for i := range 100 * n {
		c.put(key(i), erasure.Header{Key: key(i)})
	}
	total := 0
	for i := range c.shards {
		s := &c.shards[i]
		if s.lru.Len() != len(s.m) || s.lru.Len() > s.max {
			t.Fatalf("shard %d: %d in the list, %d in the map, max %d", i, s.lru.Len(), len(s.m), s.max)
		}
		total += s.lru.Len()
	}
	if total > n || total < n/2 {
		t.Fatalf("cache of %d holds %d headers", n, total)
	}
	if _, ok := c.get(key(100*n - 1)); !ok {
		t.Fatal("the last header put was evicted")
	}
	if _, ok := c.get(key(0)); ok {
		t.Fatal("the first header put is still there")
	}
}
