package client

import (
	"io"
	"math"
)

// Put's source is read ahead of the File's write-behind on goroutines of
// its own, as a writer through the mount reads its source in its own
// process: the copy out of the page cache then overlaps the encoding,
// sealing and sending of the stripes before it instead of taking turns
// with them, and a stripe is ready whenever the write-behind takes one.
const (
	// sourceAhead is how many stripes of the source are read ahead.
	sourceAhead = 4
	// sourceReaders is how many stripes of a source read with ReadAt (a
	// file) are read at once: copying from the page cache is a CPU's
	// work, about 2 GB/s for one.
	sourceReaders = 2
)

// sourceStripe is stripe s of the source: l user bytes in b's data shards
// (l < a full stripe only at the end), or the error reading it.
type sourceStripe struct {
	b   *stripeBuf
	l   int
	err error
}

// readSource reads r into stripe buffers of pool (k data shards of unit
// bytes) ahead of the caller and returns a function that yields the
// stripes in order: the last one is short (l == 0 past the end) or
// carries an error. With at (a ReaderAt for the same bytes from offset 0),
// sourceReaders stripes are read at once; else r is read in order by one
// goroutine. The caller calls stop when done (at the end or giving up);
// it returns once every reader has ended, their unread buffers back in
// the pool. The caller owns the buffers yielded.
func readSource(r io.Reader, at io.ReaderAt, pool *bufPool, k, unit int) (next func() sourceStripe, stop func()) {
	quit := make(chan struct{})
	n := 1
	if at != nil {
		n = sourceReaders
	}
	sb := int64(k) * int64(unit)
	outs := make([]chan sourceStripe, n)
	done := make(chan struct{}, n)
	for j := range outs {
		outs[j] = make(chan sourceStripe, max(1, sourceAhead/n))
		go func() {
			defer func() { done <- struct{}{} }()
			for s := int64(j); ; s += int64(n) {
				src := r
				if at != nil {
					src = io.NewSectionReader(at, s*sb, math.MaxInt64-s*sb)
				}
				b := pool.get()
				l, err := readStripe(src, b, k, unit)
				select {
				case outs[j] <- sourceStripe{b, l, err}:
				case <-quit:
					pool.put(b)
					return
				}
				if err != nil || int64(l) < sb {
					return
				}
			}
		}()
	}
	s := 0
	next = func() sourceStripe {
		st := <-outs[s%n]
		s++
		return st
	}
	stop = func() {
		close(quit)
		for range n {
			<-done
		}
		for _, o := range outs {
			for len(o) > 0 {
				pool.put((<-o).b)
			}
		}
	}
	return next, stop
}
