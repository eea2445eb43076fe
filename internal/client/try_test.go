package client_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"poolfs/internal/client"
)

// TestTryReadAt: TryReadAt serves only what is at hand and otherwise
// answers ErrWouldBlock having read nothing; a 4 KiB sequential reader
// that tries first and falls back to ReadAt (as the mount's io_uring
// queues do) gets every byte, and nearly every request is served by the
// try once readahead runs ahead of it.
func TestTryReadAt(t *testing.T) {
	conn := start(t)
	ctx := context.Background()
	const stripe = 4 * 64 << 10 // 4+2, 64 KiB units
	const stripes = 16
	w, data := written(t, conn, "f", stripes*stripe)
	f := reopen(t, conn, w)
	buf := make([]byte, 4096)
	if _, err := f.TryReadAt(ctx, buf, 0); !errors.Is(err, client.ErrWouldBlock) {
		t.Fatalf("cold try: %v, want ErrWouldBlock", err)
	}
	if whole, ranges := f.ReadCounts(); whole+ranges != 0 {
		t.Fatalf("a try that would wait read %d stripes and %d ranges", whole, ranges)
	}
	if n, err := f.TryReadAt(ctx, buf, int64(len(data))); n != 0 || err != io.EOF {
		t.Fatalf("try at the end: %d, %v; want 0, EOF", n, err)
	}
	got := make([]byte, len(data))
	fallbacks := 0
	for off := 0; off < len(data); off += len(buf) {
		p := got[off : off+len(buf)]
		n, err := f.TryReadAt(ctx, p, int64(off))
		if errors.Is(err, client.ErrWouldBlock) {
			fallbacks++
			n, err = f.ReadAt(ctx, p, int64(off))
		}
		if err != nil || n != len(p) {
			t.Fatalf("read at %d: %d bytes, %v", off, n, err)
		}
	}
	if !bytes.Equal(got, data) {
		t.Fatal("content differs")
	}
	reqs := len(data) / len(buf)
	t.Logf("%d of %d requests fell back to ReadAt", fallbacks, reqs)
	// A fallback waits for its stripe; the stripe's other 63 requests
	// then find it. At most one per stripe, and the records' end.
	if fallbacks > stripes+2 {
		t.Errorf("%d of %d requests fell back; want at most %d", fallbacks, reqs, stripes+2)
	}

	// Bytes written through the handle and not yet flushed are read with
	// the mutex held from the drives and the buffers: not at hand.
	if _, err := f.WriteAt(ctx, []byte("new"), 5); err != nil {
		t.Fatal(err)
	}
	if _, err := f.TryReadAt(ctx, buf, 0); !errors.Is(err, client.ErrWouldBlock) {
		t.Fatalf("try over unflushed writes: %v, want ErrWouldBlock", err)
	}
}

// TestTryWriteAtFor: TryWriteAtFor buffers writes that only add to the
// buffers and refuses, changing nothing, the one that completes a stripe
// (which goes to the background and may wait for a slot); with
// WriteAtFor taking the refused ones the file holds exactly what was
// written.
func TestTryWriteAtFor(t *testing.T) {
	conn := start(t)
	ctx := context.Background()
	const stripe = 4 * 64 << 10
	_, data := written(t, conn, "src", 3*stripe+5000)
	w := create(t, conn, "f")
	m := w.Mark()
	fallbacks := 0
	for off := 0; off < len(data); off += 4096 {
		p := data[off:min(off+4096, len(data))]
		size := w.Attr().Size
		n, err := w.TryWriteAtFor(ctx, m, p, int64(off))
		if errors.Is(err, client.ErrWouldBlock) {
			if s := w.Attr().Size; s != size {
				t.Fatalf("a try that would wait changed the size from %d to %d", size, s)
			}
			fallbacks++
			n, err = w.WriteAtFor(ctx, m, p, int64(off))
		}
		if err != nil || n != len(p) {
			t.Fatalf("write at %d: %d, %v", off, n, err)
		}
	}
	if fallbacks != 3 {
		t.Errorf("%d writes fell back; want the 3 that complete a stripe", fallbacks)
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	r := reopen(t, conn, w)
	got := make([]byte, len(data))
	if n, err := r.ReadAt(ctx, got, 0); n != len(data) || (err != nil && err != io.EOF) {
		t.Fatalf("read back %d, %v", n, err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("content differs")
	}
}
