package client

import "poolfs/internal/meta"

// SetSeqWindow sets how far from an established stream a read still
// counts as part of it (seqWindow), so that tests of several streams on
// one file need not write files larger than it.
func SetSeqWindow(f *File, w int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mu.streams.window = w
}

// SetFoldWritten makes every fold of c call fn once its fragments are
// written, before the commit; fn returning false stops the fold there as a
// crash would (no commit, no cleanup).
func SetFoldWritten(c *Client, fn func(rec meta.StripeRec) bool) { c.foldWritten = fn }

// SetLogWritten makes every write-back of c to the delta log call fn
// once its log stripes are written, before the commit; fn returning false
// stops it there as a crash would (no commit, no cleanup).
func SetLogWritten(c *Client, fn func(logs []meta.LogCommit) bool) { c.logWritten = fn }

// Filling is how many stripes f's cache is still reading.
func Filling(f *File) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mu.cache.filling()
}
