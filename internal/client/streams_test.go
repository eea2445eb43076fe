package client_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"poolfs/internal/client"
)

// TestSharedFileReaders: 2, 4 and 8 readers of one File (as the mount
// serves every reader of an inode from one File), each reading its part
// of the file sequentially in requests of a quarter stripe, in IOR's
// segmented layout (a contiguous part each) and strided one (the
// readers' requests interleaved), taking turns or running at once. Every
// byte is checked, and each reader is served as the sequential stream it
// is: whole stripes read once into the cache and read ahead, with range
// reads only for the requests that start each stream. With one stream
// per File the readers of a segmented file reset each other at every
// request and were served a shard range per request.
func TestSharedFileReaders(t *testing.T) {
	const (
		stripe = 4 * 64 << 10 // 4+2, 64 KiB units
		per    = 12           // stripes per reader
		xfer   = 64 << 10
		ahead  = 4
	)
	conn := startWith(t, client.Options{ReadAhead: ahead, ReadAheadTotal: 16 * ahead})
	ctx := context.Background()
	for _, n := range []int{2, 4, 8} {
		w, data := written(t, conn, fmt.Sprintf("shared%d", n), n*per*stripe)
		for _, layout := range []string{"segmented", "strided"} {
			// offs[r] are reader r's offsets in the order it reads them.
			offs := make([][]int64, n)
			for r := range n {
				for j := range int64(per * stripe / xfer) {
					if layout == "segmented" {
						offs[r] = append(offs[r], int64(r)*per*stripe+j*xfer)
					} else {
						offs[r] = append(offs[r], (j*int64(n)+int64(r))*xfer)
					}
				}
			}
			for _, mode := range []string{"turns", "parallel"} {
				t.Run(fmt.Sprintf("%d/%s/%s", n, layout, mode), func(t *testing.T) {
					f := reopen(t, conn, w)
					defer f.Close()
					// The readers' parts are further apart than the window
					// in which an established stream takes any read as its
					// own, as large files' parts are in production.
					client.SetSeqWindow(f, 8*stripe)
					got := make([]byte, len(data))
					read := func(off int64) error {
						k, err := f.ReadAt(ctx, got[off:off+xfer], off)
						if err != nil || k != xfer {
							return fmt.Errorf("read at %d: %d bytes, %v", off, k, err)
						}
						return nil
					}
					held := 0
					if mode == "turns" {
						for j := range offs[0] {
							for r := range n {
								if err := read(offs[r][j]); err != nil {
									t.Fatal(err)
								}
								held = max(held, conn.Client.ReadAheadHeld())
							}
						}
					} else {
						// At once, but kept within a stripe's requests of
						// each other, as the tasks of an IOR run are (they
						// run at one rate): readers further apart than the
						// cache holds read a stripe again.
						const step = stripe / xfer
						for j := 0; j < len(offs[0]); j += step {
							var wg sync.WaitGroup
							errs := make(chan error, n)
							for r := range n {
								wg.Go(func() {
									for _, off := range offs[r][j : j+step] {
										if err := read(off); err != nil {
											errs <- err
											return
										}
									}
								})
							}
							wg.Wait()
							close(errs)
							for err := range errs {
								t.Fatal(err)
							}
						}
					}
					if !bytes.Equal(got, data) {
						t.Fatal("content differs")
					}
					whole, ranges := f.ReadCounts()
					t.Logf("%d stripes read whole, %d shard ranges, %d read ahead at most", whole, ranges, held)
					// Range reads only while a stream is being found:
					// two requests per reader, and in the strided layout
					// (where no reader's own requests are adjacent, only
					// the file's) up to the requests of two stripes more.
					// Every stripe is read whole once (a stripe whose
					// requests all came before then, by range reads).
					stripes, maxRanges := int64(n*per), int64(2*n)
					if layout == "strided" {
						maxRanges += 2 * stripe / xfer
					}
					if ranges > maxRanges || whole < stripes-ranges/(stripe/xfer) || whole > stripes+int64(n*ahead) {
						t.Errorf("read as %d whole stripes and %d shard ranges; want each of the %d stripes read whole (up to %d more read ahead past a reader's part) and at most %d range reads",
							whole, ranges, stripes, n*ahead, maxRanges)
					}
					if mode == "turns" && held == 0 {
						t.Error("nothing was read ahead")
					}
				})
			}
		}
	}
}

// TestStaleStreamsLetGo: once several readers of a File have stopped and
// one reads on, the cache shrinks back to one stream's window, so the
// File does not keep the read-ahead stripes (and the client's read-ahead
// budget) of readers that are gone. The bytes are checked.
func TestStaleStreamsLetGo(t *testing.T) {
	const (
		stripe  = 4 * 64 << 10 // 4+2, 64 KiB units
		xfer    = 64 << 10
		ahead   = 4
		readers = 8
		inFl    = 8 // StripesInFlight
	)
	conn := startWith(t, client.Options{ReadAhead: ahead, ReadAheadTotal: 16 * ahead, StripesInFlight: inFl})
	ctx := context.Background()
	w, data := written(t, conn, "f", 160*stripe)
	f := reopen(t, conn, w)
	defer f.Close()
	client.SetSeqWindow(f, 8*stripe)
	got := make([]byte, len(data))
	read := func(off int) {
		t.Helper()
		if k, err := f.ReadAt(ctx, got[off:off+xfer], int64(off)); err != nil || k != xfer {
			t.Fatalf("read at %d: %d bytes, %v", off, k, err)
		}
	}
	// Eight readers, 12 stripes apart, read two stripes each in turns.
	for j := 0; j < 2*stripe; j += xfer {
		for r := range readers {
			read(r*12*stripe + j)
		}
	}
	// Then the last reads on, 64 stripes (256 reads) and more, never
	// meeting the others' streams.
	last := (readers - 1) * 12 * stripe
	for off := last + 2*stripe; off < len(data); off += xfer {
		read(off)
	}
	for r := range readers {
		lo, hi := r*12*stripe, r*12*stripe+2*stripe
		if r == readers-1 {
			hi = len(data)
		}
		if !bytes.Equal(got[lo:hi], data[lo:hi]) {
			t.Fatalf("reader %d: content differs", r)
		}
	}
	if h := conn.Client.ReadAheadHeld(); h > ahead+inFl {
		t.Errorf("%d read-ahead stripes held for one reader; want at most its window and StripesInFlight (%d)", h, ahead+inFl)
	}
}

// TestRandomReadsAreNotStreams: 4 KiB reads at random offsets of one
// File are served by shard-range reads, not taken for sequential streams
// (a whole stripe, and readahead, for every few KiB asked for). With up to
// maxStreams earlier reads to land near, a tolerance of two stripes for a
// stream not yet established took them for streams thousands of times,
// as did the single stream of a file within its window.
func TestRandomReadsAreNotStreams(t *testing.T) {
	const stripe = 4 * 64 << 10 // 4+2, 64 KiB units
	conn := start(t)
	ctx := context.Background()
	for _, stripes := range []int{64, 256} {
		t.Run(fmt.Sprint(stripes), func(t *testing.T) {
			w, data := written(t, conn, fmt.Sprintf("random%d", stripes), stripes*stripe)
			f := reopen(t, conn, w)
			defer f.Close()
			rng := rand.New(rand.NewPCG(3, 4))
			buf := make([]byte, 4096)
			for range 2000 {
				off := rng.IntN(len(data)/len(buf)) * len(buf)
				if k, err := f.ReadAt(ctx, buf, int64(off)); err != nil || k != len(buf) || !bytes.Equal(buf, data[off:off+k]) {
					t.Fatalf("read at %d: %d bytes, %v, equal %v", off, k, err, bytes.Equal(buf[:k], data[off:off+k]))
				}
			}
			whole, ranges := f.ReadCounts()
			t.Logf("%d stripes read whole, %d shard ranges", whole, ranges)
			if whole > int64(stripes/8) {
				t.Errorf("2000 random 4 KiB reads read %d stripes whole; want at most %d", whole, stripes/8)
			}
		})
	}
}

// TestStridedLaggard: four readers of a strided file (each stripe holds a
// request of each), one of them lagging lag stripes behind the others, as
// a descheduled task of an IOR run does. The cache keeps the stripes the
// laggard has still to read rather than letting the others' readahead push
// them out: each stripe is read whole once (and a few read ahead past the
// end), not again for the laggard. The bytes are checked.
func TestStridedLaggard(t *testing.T) {
	const (
		stripe  = 4 * 64 << 10 // 4+2, 64 KiB units
		xfer    = 64 << 10     // a quarter stripe: one request of each reader per stripe
		readers = 4
		stripes = 48
		ahead   = 4
	)
	conn := startWith(t, client.Options{ReadAhead: ahead, ReadAheadTotal: 16 * ahead, StripesInFlight: 8})
	ctx := context.Background()
	w, data := written(t, conn, "strided", stripes*stripe)
	for _, lag := range []int{4, 8, 10} {
		t.Run(fmt.Sprint(lag), func(t *testing.T) {
			f := reopen(t, conn, w)
			defer f.Close()
			got := make([]byte, len(data))
			read := func(r, s int) {
				off := (s*readers + r) * xfer
				if k, err := f.ReadAt(ctx, got[off:off+xfer], int64(off)); err != nil || k != xfer {
					t.Fatalf("reader %d at %d: %d bytes, %v", r, off, k, err)
				}
			}
			for s := 0; s < stripes+lag; s++ {
				for r := 1; r < readers && s < stripes; r++ {
					read(r, s)
				}
				if s >= lag {
					read(0, s-lag)
				}
			}
			if !bytes.Equal(got, data) {
				t.Fatal("content differs")
			}
			whole, ranges := f.ReadCounts()
			t.Logf("%d stripes read whole, %d shard ranges", whole, ranges)
			if whole > stripes+ahead || ranges > 2*readers {
				t.Errorf("read as %d whole stripes and %d shard ranges; want each of the %d stripes read whole once (and up to %d read ahead past the end), at most %d range reads",
					whole, ranges, stripes, ahead, 2*readers)
			}
		})
	}
}

// TestReadAheadStopsAtNextPart: readers of a segmented file, each reading
// its part after the reader of the next part has read that one, as the
// tasks of an IOR run drift apart. A reader's read-ahead stops where the
// next reader's part starts, as a reader of a file of its own stops at
// its end: every stripe is read whole exactly once. Reading ahead on into
// the next part fetched, at the end of every part, a window of stripes
// its reader had already read and the cache had let go. The bytes are
// checked.
func TestReadAheadStopsAtNextPart(t *testing.T) {
	const (
		stripe  = 4 * 64 << 10 // 4+2, 64 KiB units
		xfer    = stripe / 2
		readers = 4
		per     = 12 // stripes per part
		ahead   = 4
	)
	conn := startWith(t, client.Options{ReadAhead: ahead, ReadAheadTotal: 16 * ahead, StripesInFlight: 4})
	ctx := context.Background()
	w, data := written(t, conn, "segmented", readers*per*stripe)
	f := reopen(t, conn, w)
	defer f.Close()
	client.SetSeqWindow(f, 2*stripe)
	got := make([]byte, len(data))
	// The last part first, then the one before it, and so on.
	for r := readers - 1; r >= 0; r-- {
		for off := r * per * stripe; off < (r+1)*per*stripe; off += xfer {
			if k, err := f.ReadAt(ctx, got[off:off+xfer], int64(off)); err != nil || k != xfer {
				t.Fatalf("reader %d at %d: %d bytes, %v", r, off, k, err)
			}
		}
	}
	if !bytes.Equal(got, data) {
		t.Fatal("content differs")
	}
	whole, ranges := f.ReadCounts()
	t.Logf("%d stripes read whole, %d shard ranges", whole, ranges)
	// Requests of half a stripe read whole stripes from the first one on.
	if whole != readers*per || ranges != 0 {
		t.Errorf("read as %d whole stripes and %d shard ranges; want each of the %d stripes read whole once", whole, ranges, readers*per)
	}
}
