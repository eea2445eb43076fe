package client

// Read-ahead that goes on while a reader waits.
//
// Read-ahead starts at reads: each read of a stream starts the stripes
// of its window that the in-flight bound lets it (File.readAhead). A
// reader waiting for a late stripe (its fragment behind other readers'
// at a busy drive or link) makes no reads, so once the other stripes of
// its window arrived nothing more was in flight for it: over many
// servers, the servers whose fragments had arrived sent nothing until
// the late one came (IOR's read over six servers showed gaps of 0.1–0.3 s
// in which two to four of them were idle). Now, while a read of the File
// waits for a stripe being filled, each stripe that arrives starts the
// next of its stream's window in its place, up to the same window, the
// same in-flight bound and the same budget. A reader that stopped (no
// read waits) starts nothing more, so what a reader that stops at the
// end of its part leaves fetched for nothing is unchanged.

// refill, run when the fill of stripe s into e has ended, starts the
// read-ahead the streams' windows allow while a read of f waits for a
// stripe, if e is still in f's cache (a File closed since, or a stripe
// let go, starts nothing).
func (f *File) refill(s uint64, e *cacheEntry) {
	if f.waiting.Load() == 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mu.cache.entries[s] != e {
		return
	}
	sb := f.stripeBytes()
	for _, st := range f.mu.streams.list {
		if !f.mu.streams.isActive(st) {
			continue
		}
		f.readAhead(uint64((st.next-1)/sb)+1, sb, f.aheadLocked(st), f.mu.streams.limit(st, st.next))
	}
}
