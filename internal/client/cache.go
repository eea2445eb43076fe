package client

import (
	"container/list"
	"context"
	"sync"

	"poolfs/internal/chunkstore"
	"poolfs/internal/erasure"
)

// stripeCache keeps the last few whole stripes a handle read, keyed by
// stripe and generation, with reads in progress shared.
type stripeCache struct {
	max     int
	entries map[uint64]*cacheEntry
	order   []uint64
}

type cacheEntry struct {
	gen   uint64
	ready chan struct{}
	data  []byte
	err   error
}

func newStripeCache(n int) *stripeCache {
	return &stripeCache{max: max(n, 2), entries: map[uint64]*cacheEntry{}}
}

func (c *stripeCache) get(s, gen uint64) *cacheEntry {
	if e := c.entries[s]; e != nil && e.gen == gen {
		return e
	}
	return nil
}

func (c *stripeCache) has(s uint64) bool { return c.entries[s] != nil }

func (c *stripeCache) start(s, gen uint64) *cacheEntry {
	e := &cacheEntry{gen: gen, ready: make(chan struct{})}
	if _, ok := c.entries[s]; !ok {
		c.order = append(c.order, s)
	}
	c.entries[s] = e
	for len(c.order) > c.max {
		delete(c.entries, c.order[0])
		c.order = c.order[1:]
	}
	return e
}

func (c *stripeCache) drop(s uint64) {
	if _, ok := c.entries[s]; !ok {
		return
	}
	delete(c.entries, s)
	for i, x := range c.order {
		if x == s {
			c.order = append(c.order[:i], c.order[i+1:]...)
			break
		}
	}
}

func (c *stripeCache) clear() {
	c.entries = map[uint64]*cacheEntry{}
	c.order = nil
}

// headerCache remembers decoded fragment headers. Fragment keys name
// immutable bytes, so an entry never goes stale.
type headerCache struct {
	mu  sync.Mutex
	max int
	lru *list.List
	m   map[erasure.FragmentKey]*list.Element
}

type headerItem struct {
	key erasure.FragmentKey
	h   erasure.Header
}

func newHeaderCache(n int) *headerCache {
	return &headerCache{max: n, lru: list.New(), m: map[erasure.FragmentKey]*list.Element{}}
}

func (c *headerCache) get(k erasure.FragmentKey) (erasure.Header, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[k]; ok {
		c.lru.MoveToFront(e)
		return e.Value.(*headerItem).h, true
	}
	return erasure.Header{}, false
}

func (c *headerCache) put(k erasure.FragmentKey, h erasure.Header) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[k]; ok {
		return
	}
	c.m[k] = c.lru.PushFront(&headerItem{k, h})
	for c.lru.Len() > c.max {
		e := c.lru.Back()
		c.lru.Remove(e)
		delete(c.m, e.Value.(*headerItem).key)
	}
}

// header returns the verified header of a fragment, from the cache or the
// drive.
func (c *Client) header(ctx context.Context, d chunkstore.Drive, key erasure.FragmentKey, shard int) (erasure.Header, error) {
	if h, ok := c.headers.get(key); ok {
		return h, nil
	}
	b, err := d.ReadFragment(ctx, key, 0, int64(erasure.HeaderSize(shard)), nil)
	if err != nil {
		return erasure.Header{}, err
	}
	h, err := erasure.DecodeHeader(b)
	if err != nil {
		return h, err
	}
	if h.Key != key || int(h.ShardSize) != shard {
		return h, erasure.ErrCorrupt
	}
	c.headers.put(key, h)
	return h, nil
}
