package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"testing"

	"poolfs/internal/client"
	"poolfs/internal/meta"
)

func create(t *testing.T, conn *conn, name string) *client.File {
	t.Helper()
	ctx := context.Background()
	a, err := conn.Meta.Create(ctx, meta.RootIno, name, meta.TypeFile, 0o644, 0, 0, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	f, err := conn.Client.Open(ctx, a.Ino, name)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// written creates file name holding n random bytes, written and flushed
// through the returned handle, and returns the bytes.
func written(t *testing.T, conn *conn, name string, n int) (*client.File, []byte) {
	t.Helper()
	ctx := context.Background()
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(rand.Uint32())
	}
	f := create(t, conn, name)
	if _, err := f.WriteAt(ctx, data, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	return f, data
}

// reopen opens a new handle of w's file (which sees what w flushed).
func reopen(t *testing.T, conn *conn, w *client.File) *client.File {
	t.Helper()
	f, err := conn.Client.Open(context.Background(), w.Attr().Ino, "f")
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// readSeq reads f from start to end in pieces of xfer bytes and returns
// what it read.
func readSeq(f *client.File, start, end int64, xfer int) ([]byte, error) {
	out := make([]byte, end-start)
	for off := start; off < end; off += int64(xfer) {
		n := min(int64(xfer), end-off)
		got, err := f.ReadAt(context.Background(), out[off-start:off-start+n], off)
		if err != nil && !(errors.Is(err, io.EOF) && off+int64(got) == end) {
			return nil, fmt.Errorf("read %d at %d: got %d: %w", n, off, got, err)
		}
	}
	return out, nil
}

// TestParallelReads: many goroutines reading one handle at once (as the
// kernel's readahead does through the mount), sequentially with several
// transfer sizes and at random offsets, get exactly the bytes written.
func TestParallelReads(t *testing.T) {
	conn := start(t)
	ctx := context.Background()
	data := make([]byte, 6<<20+12345) // 24 stripes and a short one
	for i := range data {
		data[i] = byte(rand.Uint32())
	}
	w := create(t, conn, "f")
	for off := 0; off < len(data); off += 1 << 20 {
		if _, err := w.WriteAt(ctx, data[off:min(off+1<<20, len(data))], int64(off)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	f := reopen(t, conn, w)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for _, xfer := range []int{1 << 20, 256 << 10, 100003, 4096} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := readSeq(f, 0, int64(len(data)), xfer)
			if err == nil && !bytes.Equal(got, data) {
				err = fmt.Errorf("sequential reads of %d bytes: content differs", xfer)
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				off := rand.IntN(len(data))
				n := 1 + rand.IntN(600<<10)
				buf := make([]byte, n)
				got, err := f.ReadAt(ctx, buf, int64(off))
				want := data[off:min(off+n, len(data))]
				if err != nil && !errors.Is(err, io.EOF) || !bytes.Equal(buf[:got], want) {
					errs <- fmt.Errorf("random read %d at %d: %d bytes, %v, equal %v", n, off, got, err, bytes.Equal(buf[:got], want))
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestReadsDuringWrites: while readers stream the first half of a file
// through one handle, a writer rewrites the second half through it stripe
// by stripe (written back in the background) and reads each write back at
// once. Every read returns exactly the bytes last written before it began.
func TestReadsDuringWrites(t *testing.T) {
	conn := start(t)
	ctx := context.Background()
	const sb = 4 * 64 << 10 // stripe bytes
	const half = 8 * sb
	f, data := written(t, conn, "f", 2*half)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for _, xfer := range []int{sb, 100003} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				got, err := readSeq(f, 0, half, xfer)
				if err == nil && !bytes.Equal(got, data[:half]) {
					err = fmt.Errorf("reader of %d bytes: first half differs", xfer)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for round := 0; round < 3; round++ {
		for s := int64(half); s < 2*half; s += sb {
			p := make([]byte, sb)
			for i := range p {
				p[i] = byte(rand.Uint32())
			}
			if _, err := f.WriteAt(ctx, p, s); err != nil {
				t.Fatal(err)
			}
			// Part of a stripe (merged at flush), then the whole one.
			got := make([]byte, sb)
			for _, r := range [][2]int{{100, 5000}, {0, sb}} {
				n, err := f.ReadAt(ctx, got[r[0]:r[1]], s+int64(r[0]))
				if err != nil || n != r[1]-r[0] || !bytes.Equal(got[r[0]:r[1]], p[r[0]:r[1]]) {
					t.Fatalf("round %d: read back %d bytes at %d: %d, %v, equal %v", round, r[1]-r[0], s+int64(r[0]), n, err, bytes.Equal(got[r[0]:r[1]], p[r[0]:r[1]]))
				}
			}
			copy(data[s:], p)
		}
		// A partial stripe, merged and committed by Flush while the
		// readers go on.
		p := []byte(fmt.Sprintf("round %d", round))
		if _, err := f.WriteAt(ctx, p, half+100); err != nil {
			t.Fatal(err)
		}
		copy(data[half+100:], p)
		if err := f.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		got, err := readSeq(f, half, 2*half, 100003)
		if err != nil || !bytes.Equal(got, data[half:]) {
			t.Fatalf("round %d: second half after flush: %v, equal %v", round, err, bytes.Equal(got, data[half:]))
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// A new handle sees what the last round wrote.
	g, err := conn.Client.Open(ctx, f.Attr().Ino, "f")
	if err != nil {
		t.Fatal(err)
	}
	got, err := readSeq(g, 0, 2*half, 1<<20)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("reopened: %v, equal %v", err, bytes.Equal(got, data))
	}
}

// TestFlushWhileWriting: one descriptor flushes over and over while
// another writes whole stripes (which go to the background), as two
// descriptors of one file in a mount do; every byte written is read back.
func TestFlushWhileWriting(t *testing.T) {
	conn := start(t)
	f := create(t, conn, "shared")
	ctx := context.Background()
	const stripe, stripes = 256 << 10, 48
	want := make([]byte, stripe*stripes)
	for i := range want {
		want[i] = byte(i * 7 / 5)
	}
	writer, flusher := f.Mark(), f.Mark()
	done := make(chan error, 1)
	go func() {
		for s := 0; s < stripes; s++ {
			if _, err := f.WriteAtFor(ctx, writer, want[s*stripe:(s+1)*stripe], int64(s*stripe)); err != nil {
				done <- err
				return
			}
		}
		done <- f.FlushFor(ctx, writer)
	}()
	flushes := 0
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			if err := f.FlushFor(ctx, flusher); err != nil {
				t.Fatal(err)
			}
			got, err := readSeq(f, 0, int64(len(want)), 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatal("content differs after concurrent writes and flushes")
			}
			t.Logf("%d flushes during the writes", flushes)
			return
		default:
			if err := f.FlushFor(ctx, flusher); err != nil {
				t.Fatal(err)
			}
			flushes++
		}
	}
}

// TestOutOfOrderSequentialReads: a sequential read whose requests arrive
// out of order within a wide window, as the kernel's readahead sends them
// (all of read_ahead_kb in flight at once), is still served as sequential:
// whole stripes into the cache, each read once, not a shard range per
// request. The bytes are checked.
func TestOutOfOrderSequentialReads(t *testing.T) {
	conn := start(t)
	ctx := context.Background()
	const stripe = 4 * 64 << 10 // 4+2, 64 KiB units
	const stripes = 64
	w, data := written(t, conn, "f", stripes*stripe)
	f := reopen(t, conn, w)
	// Requests of one unit, in windows of 8 stripes (32 requests), each
	// window in a random order.
	const xfer, window = 64 << 10, 8 * stripe
	rng := rand.New(rand.NewPCG(1, 2))
	got := make([]byte, len(data))
	for base := 0; base < len(data); base += window {
		offs := make([]int, 0, window/xfer)
		for off := base; off < base+window; off += xfer {
			offs = append(offs, off)
		}
		rng.Shuffle(len(offs), func(i, j int) { offs[i], offs[j] = offs[j], offs[i] })
		for _, off := range offs {
			if n, err := f.ReadAt(ctx, got[off:off+xfer], int64(off)); err != nil || n != xfer {
				t.Fatalf("read at %d: %d bytes, %v", off, n, err)
			}
		}
	}
	if !bytes.Equal(got, data) {
		t.Fatal("content differs")
	}
	whole, ranges := f.ReadCounts()
	t.Logf("%d stripes read whole, %d shard ranges", whole, ranges)
	// The first window, in random order from its start (the kernel's
	// first readahead is in order), may go by range reads until two
	// requests in a row land near each other; after that, none.
	if ranges > 16 || whole < stripes-2 || whole > stripes {
		t.Errorf("read as %d whole stripes and %d shard ranges; want each of the %d stripes read whole once, and at most 16 range reads (of the first window's 32 requests)",
			whole, ranges, stripes)
	}
}
