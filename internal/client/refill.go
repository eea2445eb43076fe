package client

import "context"

// Read-ahead that goes on while a reader waits.
//
// Read-ahead starts at reads: each read of a stream starts the stripes
// of its window that the in-flight bound lets it (File.readAhead). A
// reader waiting for a late stripe (its fragment behind other readers'
// at a busy drive or link) makes no reads, so once the other stripes of
// its window arrived nothing more was in flight for it: over many
// servers, the servers whose fragments had arrived sent nothing until
// the late one came (IOR's read over six servers showed gaps of 0.1–0.3 s
// in which two to four of them were idle). Now, while a read of a stream
// waits for a stripe being filled, each stripe of the File that arrives
// starts the next of that stream's window in its place, as the stream's
// next read would: the same window, in-flight bound and budget. Streams
// without a waiting read (a reader that stopped, or one left behind by
// out-of-order requests) start nothing, so what a reader that stops at
// the end of its part leaves fetched for nothing is unchanged.

// waitFor waits for e, a stripe a read of stream st (nil: not a
// sequential read) needs, counted as waiting meanwhile.
func (f *File) waitFor(ctx context.Context, e *cacheEntry, st *readStream) error {
	if st == nil {
		return e.wait(ctx)
	}
	st.waiting.Add(1)
	f.waiting.Add(1)
	defer func() {
		f.waiting.Add(-1)
		st.waiting.Add(-1)
	}()
	select {
	case <-e.ready:
	default:
		// The fills that ended between the read's plan and now found
		// no read waiting and started nothing: with every other stripe
		// of the window arrived, none would be left to (a test saw the
		// window stop at the in-flight bound about one run in ten).
		f.mu.Lock()
		f.refillLocked()
		f.mu.Unlock()
	}
	return e.wait(ctx)
}

// refill, run when the fill of stripe s into e has ended, starts the
// read-ahead of each stream with a waiting read that its window allows,
// if e is still in f's cache (a File closed since, or a stripe let go,
// starts nothing).
func (f *File) refill(s uint64, e *cacheEntry) {
	if f.waiting.Load() == 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mu.cache.entries[s] != e {
		return
	}
	f.refillLocked()
}

// refillLocked starts the read-ahead of each stream with a waiting read
// that its window allows.
func (f *File) refillLocked() {
	sb := f.stripeBytes()
	for _, st := range f.mu.streams.list {
		if st.waiting.Load() == 0 || !f.mu.streams.isActive(st) {
			continue
		}
		f.readAhead(uint64((st.next-1)/sb)+1, sb, f.aheadLocked(st), f.mu.streams.limit(st, st.next))
	}
}
