package client

// SetSeqWindow sets how far from an established stream a read still
// counts as part of it (seqWindow), so that tests of several streams on
// one file need not write files larger than it.
func SetSeqWindow(f *File, w int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mu.streams.window = w
}
