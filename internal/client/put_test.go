package client_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"poolfs/internal/client"
	"poolfs/internal/meta"
)

// countingReader counts the bytes read from it.
type countingReader struct{ n int }

func (r *countingReader) Read(p []byte) (int, error) {
	r.n += len(p)
	return len(p), nil
}

// TestPutOntoDirectoryReadsNothing: a Put whose target is a directory is
// refused with meta.ErrIsDir before a byte of the source is read (it used
// to upload everything, then fail at the rename).
func TestPutOntoDirectoryReadsNothing(t *testing.T) {
	conn := start(t)
	ctx := context.Background()
	if err := conn.Client.Mkdir(ctx, "/d", 0o755, false); err != nil {
		t.Fatal(err)
	}
	r := &countingReader{}
	_, err := conn.Client.Put(ctx, "/d", r, client.PutOptions{Size: 1 << 20})
	if !errors.Is(err, meta.ErrIsDir) {
		t.Fatalf("put onto a directory: %v, want ErrIsDir", err)
	}
	if r.n != 0 {
		t.Fatalf("put read %d bytes of its source before refusing", r.n)
	}
	ents, err := conn.Client.ReadDir(ctx, "/")
	if err != nil || len(ents) != 1 || ents[0].Name != "d" {
		t.Fatalf("root after the refused put: %v %v, want only d", ents, err)
	}
}

// chunkReader yields its bytes at most n at a time, as a pipe does.
type chunkReader struct {
	b []byte
	n int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	k := copy(p[:min(len(p), r.n)], r.b)
	r.b = r.b[k:]
	return k, nil
}

// TestPutGetBytes: files of every shape (empty, inside one unit, a stripe
// exactly, stripes and a short tail, stripes and a tail of most of a
// stripe, more stripes than the write-behind window), streamed from a
// source of unknown size, come back from Get byte for byte, and a File
// reads what Put stored. Twice: with stripes of 256 KiB (a full stripe is
// no larger than a flat dirty buffer) and of 1 MiB.
func TestPutGetBytes(t *testing.T) {
	conn := start(t)
	ctx := context.Background()
	if err := conn.Client.Mkdir(ctx, "/wide", 0o755, false); err != nil {
		t.Fatal(err)
	}
	wide, err := conn.Client.Resolve(ctx, "/wide")
	if err != nil {
		t.Fatal(err)
	}
	l := wide.Layout
	l.Unit = 256 << 10
	if err := conn.Meta.SetLayout(ctx, wide.Ino, l); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []struct {
		path   string
		stripe int
	}{{"", 4 * 64 << 10}, {"/wide", 4 * 256 << 10}} {
		stripe := dir.stripe
		for _, tc := range []struct {
			name string
			n    int
		}{
			{"empty", 0},
			{"one byte", 1},
			{"unit minus one", 64<<10 - 1},
			{"one stripe", stripe},
			{"stripe plus one", stripe + 1},
			{"stripes and most of one", 3*stripe - 5000},
			{"beyond the write-behind window", 40*stripe + 12345},
		} {
			p := dir.path + "/" + strings.ReplaceAll(tc.name, " ", "-")
			t.Run(p, func(t *testing.T) {
				data := make([]byte, tc.n)
				for i := range data {
					data[i] = byte(rand.Uint32())
				}
				a, err := conn.Client.Put(ctx, p, &chunkReader{data, 7777}, client.PutOptions{Size: -1})
				if err != nil {
					t.Fatal(err)
				}
				if a.Size != uint64(tc.n) {
					t.Fatalf("put returned size %d, want %d", a.Size, tc.n)
				}
				var got bytes.Buffer
				if _, err := conn.Client.Get(ctx, p, &got, client.GetOptions{}); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got.Bytes(), data) {
					t.Fatalf("get: %d bytes differ from the %d put", got.Len(), len(data))
				}
				f, err := conn.Client.Open(ctx, a.Ino, p)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				back, err := readSeq(f, 0, int64(tc.n), 100000)
				if err != nil || !bytes.Equal(back, data) {
					t.Fatalf("File read of the put file: %v (equal %v)", err, bytes.Equal(back, data))
				}
			})
		}
	}
}

// TestPutReplaceOldOrNew: while Puts replace a file again and again, Gets
// of it and a File opened (as the mount opens) on one version see a whole
// version, never a mix
// of two or zeros. (A Get that finds the file between its lookup and its
// first read gone may fail with ErrNotFound: the version it looked up no
// longer exists.)
func TestPutReplaceOldOrNew(t *testing.T) {
	conn := start(t)
	ctx := context.Background()
	const n = 6*4*64<<10 + 999
	versions := make([][]byte, 3)
	for v := range versions {
		versions[v] = bytes.Repeat([]byte{byte('a' + v)}, n)
		for i := 0; i < n; i += 4096 {
			versions[v][i] = byte(rand.Uint32())
		}
	}
	if _, err := conn.Client.Put(ctx, "/f", bytes.NewReader(versions[0]), client.PutOptions{Size: n}); err != nil {
		t.Fatal(err)
	}
	old, err := conn.Client.Resolve(ctx, "/f")
	if err != nil {
		t.Fatal(err)
	}
	// Opened as the mount opens: the open keeps the replaced inode.
	if err := conn.Meta.Open(ctx, old.Ino); err != nil {
		t.Fatal(err)
	}
	held, err := conn.Client.OpenAttr(old, "/f")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	which := func(b []byte) int {
		for v, want := range versions {
			if bytes.Equal(b, want) {
				return v
			}
		}
		return -1
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(done)
		for i := 1; i <= 12; i++ {
			v := versions[i%len(versions)]
			if _, err := conn.Client.Put(ctx, "/f", bytes.NewReader(v), client.PutOptions{Size: n}); err != nil {
				t.Errorf("put %d: %v", i, err)
				return
			}
		}
	}()
	gets := 0
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		var got bytes.Buffer
		_, err := conn.Client.Get(ctx, "/f", &got, client.GetOptions{})
		if errors.Is(err, meta.ErrNotFound) {
			continue
		}
		if err != nil {
			t.Fatalf("get during puts: %v", err)
		}
		if which(got.Bytes()) < 0 {
			t.Fatalf("get during puts returned %d bytes that are no version written", got.Len())
		}
		gets++
	}
	wg.Wait()
	if back, err := readSeq(held, 0, n, 64<<10); err != nil || which(back) != 0 {
		t.Fatalf("a File opened before the puts: %v, version %d, want 0", err, which(back))
	}
	var got bytes.Buffer
	if _, err := conn.Client.Get(ctx, "/f", &got, client.GetOptions{}); err != nil || which(got.Bytes()) != 12%len(versions) {
		t.Fatalf("after the puts: %v, version %d, want the last", err, which(got.Bytes()))
	}
	t.Logf("%d gets during 12 puts", gets)
}

// blockingWriter takes the first after bytes and holds every Write beyond
// them until release is closed, noting when the first such Write arrives.
type blockingWriter struct {
	buf     bytes.Buffer
	after   int
	once    sync.Once
	stalled chan struct{}
	release chan struct{}
}

func (w *blockingWriter) Write(p []byte) (int, error) {
	if w.buf.Len()+len(p) > w.after {
		w.once.Do(func() { close(w.stalled) })
		<-w.release
	}
	return w.buf.Write(p)
}

// TestGetReadsAheadWithinBudget: Get reads ahead through the client's
// read-ahead budget (Options.ReadAheadTotal) like any sequential reader of
// a File, so many Gets at once hold no more stripes than that, and every
// stripe is given back when Get returns. (Get used to keep a read-ahead
// window of its own, outside the budget.)
func TestGetReadsAheadWithinBudget(t *testing.T) {
	conn := startWith(t, client.Options{ReadAhead: 4, ReadAheadTotal: 6})
	ctx := context.Background()
	const stripe = 4 * 64 << 10
	data := make([]byte, 20*stripe+5)
	for i := range data {
		data[i] = byte(rand.Uint32())
	}
	if _, err := conn.Client.Put(ctx, "/g", bytes.NewReader(data), client.PutOptions{Size: int64(len(data))}); err != nil {
		t.Fatal(err)
	}
	// The first stripe passes; Get stalls once it has read on (a File
	// reads ahead for a read that continues a stream).
	w := &blockingWriter{after: stripe, stalled: make(chan struct{}), release: make(chan struct{})}
	errc := make(chan error, 1)
	go func() {
		_, err := conn.Client.Get(ctx, "/g", w, client.GetOptions{})
		errc <- err
	}()
	<-w.stalled
	// The reader is stalled at its second stripe: what it has read ahead
	// meanwhile is counted in the budget, and never more.
	deadline := time.Now().Add(10 * time.Second)
	for conn.Client.ReadAheadHeld() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if h := conn.Client.ReadAheadHeld(); h == 0 || h > 6 {
		t.Fatalf("a stalled Get holds %d read-ahead stripes, want 1 to 6", h)
	}
	close(w.release)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(w.buf.Bytes(), data) {
		t.Fatal("get: content differs")
	}
	for conn.Client.ReadAheadHeld() != 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if h := conn.Client.ReadAheadHeld(); h != 0 {
		t.Fatalf("%d read-ahead stripes still held after Get returned", h)
	}
}

// TestGetHolesAndShortStripes: Get of a file with holes (stripes never
// written) and a stripe shorter than the file reaches into (the file grown
// by truncate after it) delivers zeros there, byte for byte as a File
// reads it.
func TestGetHolesAndShortStripes(t *testing.T) {
	conn := start(t)
	ctx := context.Background()
	const stripe = 4 * 64 << 10
	f := create(t, conn, "sparse")
	want := make([]byte, 5*stripe+77)
	for _, w := range []struct{ off, n int }{{0, 1000}, {3*stripe + 5, 70000}} {
		p := want[w.off : w.off+w.n]
		for i := range p {
			p[i] = byte(rand.Uint32())
		}
		if _, err := f.WriteAt(ctx, p, int64(w.off)); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(ctx, int64(len(want))); err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if _, err := conn.Client.Get(ctx, "/sparse", &got, client.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatalf("get: %d bytes, differ from the %d expected", got.Len(), len(want))
	}
}

// failingReader yields n random bytes, then fails.
type failingReader struct{ n int }

var errSource = errors.New("source broke")

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, errSource
	}
	k := min(len(p), r.n)
	for i := range p[:k] {
		p[i] = byte(rand.Uint32())
	}
	r.n -= k
	return k, nil
}

// TestPutSourceErrorKeepsTarget: a Put whose source fails after several
// stripes (some written in the background, one partly buffered) returns
// the source's error, leaves the file it replaces as it was and no
// temporary file behind, and a Put afterwards works.
func TestPutSourceErrorKeepsTarget(t *testing.T) {
	conn := start(t)
	ctx := context.Background()
	const stripe = 4 * 64 << 10
	old := bytes.Repeat([]byte("old!"), stripe/4+3)
	if _, err := conn.Client.Put(ctx, "/t", bytes.NewReader(old), client.PutOptions{Size: -1}); err != nil {
		t.Fatal(err)
	}
	_, err := conn.Client.Put(ctx, "/t", &failingReader{5*stripe + 1000}, client.PutOptions{Size: -1})
	if !errors.Is(err, errSource) {
		t.Fatalf("put from a failing source: %v, want its error", err)
	}
	var got bytes.Buffer
	if _, err := conn.Client.Get(ctx, "/t", &got, client.GetOptions{}); err != nil || !bytes.Equal(got.Bytes(), old) {
		t.Fatalf("target after the failed put: %v (unchanged %v)", err, bytes.Equal(got.Bytes(), old))
	}
	ents, err := conn.Client.ReadDir(ctx, "/")
	if err != nil || len(ents) != 1 || ents[0].Name != "t" {
		t.Fatalf("root after the failed put: %v %v, want only t", ents, err)
	}
	fresh := bytes.Repeat([]byte("new!"), stripe)
	if _, err := conn.Client.Put(ctx, "/t", bytes.NewReader(fresh), client.PutOptions{Size: -1}); err != nil {
		t.Fatal(err)
	}
	got.Reset()
	if _, err := conn.Client.Get(ctx, "/t", &got, client.GetOptions{}); err != nil || !bytes.Equal(got.Bytes(), fresh) {
		t.Fatalf("put after the failed one: %v (equal %v)", err, bytes.Equal(got.Bytes(), fresh))
	}
}
