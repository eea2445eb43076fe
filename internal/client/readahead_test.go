package client_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"poolfs/internal/chunkstore"
	"poolfs/internal/chunkstore/drivetest"
	"poolfs/internal/client"
	"poolfs/internal/clustermap"
	"poolfs/internal/erasure"
	"poolfs/internal/placement"
)

// TestReadAheadBudget: files read at once share the client's read-ahead
// budget (Options.ReadAheadTotal, smaller here than their windows
// together): they read ahead while it lasts, every byte still arrives
// (readers fill what they ask for themselves), and closing the files gives
// every stripe back.
func TestReadAheadBudget(t *testing.T) {
	const total = 6
	conn := startWith(t, client.Options{ReadAhead: 4, ReadAheadTotal: total})
	ctx := context.Background()
	const stripe = 4 * 64 << 10
	const n = 3
	var files []*client.File
	var want [][]byte
	for i := range n {
		w, data := written(t, conn, string(rune('a'+i)), 12*stripe)
		f := reopen(t, conn, w)
		files, want = append(files, f), append(want, data)
	}
	got := make([][]byte, n)
	for i := range got {
		got[i] = make([]byte, len(want[i]))
	}
	held := 0
	// The files in turn, 64 KiB at a time: each keeps a stream going.
	for off := 0; off < len(want[0]); off += 64 << 10 {
		for i, f := range files {
			if k, err := f.ReadAt(ctx, got[i][off:off+64<<10], int64(off)); err != nil || k != 64<<10 {
				t.Fatalf("file %d at %d: %d, %v", i, off, k, err)
			}
			held = max(held, conn.Client.ReadAheadHeld())
		}
	}
	for i := range files {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("file %d: content differs", i)
		}
	}
	if held == 0 {
		t.Fatal("nothing was read ahead")
	}
	for _, f := range files {
		f.Close()
	}
	// Stripes still being read come back when their reads end.
	deadline := time.Now().Add(10 * time.Second)
	for conn.Client.ReadAheadHeld() != 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if h := conn.Client.ReadAheadHeld(); h != 0 {
		t.Fatalf("%d read-ahead stripes still held after every file was closed", h)
	}
}

// TestReadAheadInFlight: a sequential reader's read-ahead window fills as
// its stripes arrive, with at most StripesInFlight stripes being read at
// once: with the drives holding every read, reads served from stripes
// already cached start no more than that many new ones (before, every read
// started one more, up to the whole window, which a reader that stops
// leaves fetched for nothing). Once the drives answer, every byte arrives.
func TestReadAheadInFlight(t *testing.T) {
	const (
		stripe   = 4 * 64 << 10 // 4+2, 64 KiB units
		ahead    = 16
		inFlight = 4
	)
	conn := startWith(t, client.Options{ReadAhead: ahead, ReadAheadTotal: 4 * ahead, StripesInFlight: inFlight})
	ctx := context.Background()
	w, data := written(t, conn, "f", 48*stripe)
	f := reopen(t, conn, w)
	defer f.Close()
	got := make([]byte, len(data))
	read := func(s int) {
		t.Helper()
		off := s * stripe
		if k, err := f.ReadAt(ctx, got[off:off+stripe], int64(off)); err != nil || k != stripe {
			t.Fatalf("stripe %d: %d bytes, %v", s, k, err)
		}
	}
	// Drives that answer at once: the window ramps up and fills (reading
	// the last stripe again continues the stream and tops the window up).
	const warm = 6
	before := fillWindow(t, f, read, warm, ahead)
	settled(t, f)
	// Drives that hold every read: the reads below are of stripes the
	// window holds; each may start read-ahead of one more.
	var release []func()
	for _, d := range conn.Drives {
		release = append(release, d.Hold(drivetest.OpRead))
	}
	held := ahead/2 + 1 // well within the stripes cached ahead of the reader
	var heldErr error
	for s := warm; s < warm+held-1 && heldErr == nil; s++ {
		// A read that waits for the drives (its stripe was let go) fails
		// rather than waiting for ever.
		hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		off := s * stripe
		if k, err := f.ReadAt(hctx, got[off:off+stripe], int64(off)); err != nil || k != stripe {
			heldErr = fmt.Errorf("stripe %d while the drives held reads: %d bytes, %v", s, k, err)
		}
		cancel()
	}
	after, _ := f.ReadCounts()
	for _, r := range release {
		r()
	}
	if heldErr != nil {
		t.Fatal(heldErr)
	}
	for s := warm + held - 1; s < 48; s++ {
		read(s)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("content differs")
	}
	t.Logf("%d stripes read ahead of %d reads of cached stripes while the drives held reads", after-before, held-1)
	if started := after - before; started > inFlight {
		t.Errorf("%d stripes started while the drives held every read; want at most %d (StripesInFlight)", started, inFlight)
	}
}

// TestCloseGivesUpReadAhead: closing a File gives up the stripes it is
// still reading ahead that no read waits for (a reader that stops at the
// end of its part of a shared file closes it: those stripes would never
// be read, and over a busy link their fragments take the link's time from
// reads that are needed). Here the drives hold every read once the window
// is full; reads of cached stripes start read-ahead of more, which is
// given up, and its stripes come back, when the File is closed.
func TestCloseGivesUpReadAhead(t *testing.T) {
	const (
		stripe   = 4 * 64 << 10
		ahead    = 8
		inFlight = 4
	)
	conn := startWith(t, client.Options{ReadAhead: ahead, ReadAheadTotal: 4 * ahead, StripesInFlight: inFlight})
	ctx := context.Background()
	w, data := written(t, conn, "f", 32*stripe)
	f := reopen(t, conn, w)
	got := make([]byte, stripe)
	read := func(s int) {
		t.Helper()
		if k, err := f.ReadAt(ctx, got, int64(s*stripe)); err != nil || k != stripe || !bytes.Equal(got, data[s*stripe:(s+1)*stripe]) {
			t.Fatalf("stripe %d: %d bytes, %v", s, k, err)
		}
	}
	const warm = 4
	before := fillWindow(t, f, read, warm, ahead)
	settled(t, f)
	for _, d := range conn.Drives {
		defer d.Hold(drivetest.OpRead)()
	}
	for s := warm; s < warm+ahead/2; s++ {
		// Cached: each may start read-ahead of one more, held. A read
		// that waits for the drives fails rather than waiting for ever.
		hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		k, err := f.ReadAt(hctx, got, int64(s*stripe))
		cancel()
		if err != nil || k != stripe || !bytes.Equal(got, data[s*stripe:(s+1)*stripe]) {
			t.Fatalf("stripe %d while the drives held reads: %d bytes, %v", s, k, err)
		}
	}
	if after, _ := f.ReadCounts(); after == before {
		t.Fatal("no read-ahead started while the drives held reads: the test proves nothing")
	}
	f.Close()
	deadline := time.Now().Add(10 * time.Second)
	for conn.Client.ReadAheadHeld() != 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if h := conn.Client.ReadAheadHeld(); h != 0 {
		t.Fatalf("%d read-ahead stripes still being read after the File was closed", h)
	}
}

// settled waits until f reads no stripe: the stripes it reads ahead are
// in its cache, and drives that hold reads from now on catch none of them
// (a fill caught half-way left a read of a stripe the test counts as
// cached waiting on the drives).
func settled(t *testing.T, f *client.File) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for client.Filling(f) != 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := client.Filling(f); n != 0 {
		t.Fatalf("%d stripes still being read after 10 s", n)
	}
}

// fillWindow reads stripes 0 to warm-1 of f with read, then the last of
// them again until f has read warm+ahead stripes: its read-ahead window
// has ramped up and filled. It returns the stripes f has read.
func fillWindow(t *testing.T, f *client.File, read func(int), warm, ahead int) int64 {
	t.Helper()
	for s := range warm {
		read(s)
	}
	deadline := time.Now().Add(10 * time.Second)
	before, _ := f.ReadCounts()
	for ; before < int64(warm+ahead) && time.Now().Before(deadline); before, _ = f.ReadCounts() {
		read(warm - 1)
		time.Sleep(time.Millisecond)
	}
	if before < int64(warm+ahead) {
		t.Fatalf("%d stripes read after %d: the window did not fill", before, warm)
	}
	return before
}

// lateStripe holds every fragment read of one stripe (data and parity:
// hedging cannot go around it) until release is closed: the stripe a
// reader waits for while its fragments queue behind other readers' at
// busy drives.
type lateStripe struct {
	inner   client.Drives
	stripe  uint64
	release chan struct{}
}

func (l *lateStripe) Drive(m *clustermap.Map, id placement.DriveID) (chunkstore.Drive, error) {
	d, err := l.inner.Drive(m, id)
	if err != nil {
		return nil, err
	}
	return &lateStripeDrive{Drive: d, l: l}, nil
}

type lateStripeDrive struct {
	chunkstore.Drive
	l *lateStripe
}

func (d *lateStripeDrive) ReadFragment(ctx context.Context, key erasure.FragmentKey, off, n int64, dst []byte) ([]byte, error) {
	if key.Stripe == d.l.stripe {
		select {
		case <-d.l.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return d.Drive.ReadFragment(ctx, key, off, n, dst)
}

// TestReadAheadGoesOnWhileAReadWaits: while a sequential reader waits
// for a late stripe, the stripes of its window that arrive start the
// rest of the window, as its reads would have. Before, read-ahead
// started only at reads: a reader waiting for one stripe had nothing else
// in flight once the others had arrived, and over many servers those
// whose fragments had arrived sat idle until the late one came.
func TestReadAheadGoesOnWhileAReadWaits(t *testing.T) {
	const (
		stripe   = testK * testUnit
		ahead    = 8
		inFlight = 2
		late     = 6 // the stripe the reader waits for
	)
	conn := start(t)
	w, data := written(t, conn, "f", 32*stripe)
	drives := &lateStripe{inner: drivetest.UpOnly(conn.Drives), stripe: late, release: make(chan struct{})}
	c := client.New(conn.Meta, conn.Maps, drives, client.Options{ReadAhead: ahead, ReadAheadTotal: 4 * ahead, StripesInFlight: inFlight})
	ctx := context.Background()
	f, err := c.Open(ctx, w.Attr().Ino, "f")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got := make([]byte, stripe)
	read := func(s int) {
		t.Helper()
		if k, err := f.ReadAt(ctx, got, int64(s*stripe)); err != nil || k != stripe || !bytes.Equal(got, data[s*stripe:(s+1)*stripe]) {
			t.Fatalf("stripe %d: %d bytes, %v", s, k, err)
		}
	}
	for s := range late {
		read(s)
	}
	done := make(chan error, 1)
	go func() { // waits for the late stripe
		p := make([]byte, stripe)
		k, err := f.ReadAt(ctx, p, late*stripe)
		if err == nil && (k != stripe || !bytes.Equal(p, data[late*stripe:(late+1)*stripe])) {
			err = fmt.Errorf("stripe %d: %d bytes, not what was written", late, k)
		}
		done <- err
	}()
	// The window past the late stripe: every stripe up to late+ahead is
	// started while the read waits (without the refill, the in-flight
	// bound of 2 stopped it at about late+inFlight).
	want := int64(late + 1 + ahead)
	deadline := time.Now().Add(10 * time.Second)
	whole, _ := f.ReadCounts()
	for ; whole < want && time.Now().Before(deadline); whole, _ = f.ReadCounts() {
		time.Sleep(time.Millisecond)
	}
	select {
	case <-done:
		t.Fatal("the read of the late stripe returned before its fragments were let go")
	default:
	}
	close(drives.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if whole < want {
		t.Fatalf("%d stripes read whole while a read waited for stripe %d, want %d (the window past it)", whole, late, want)
	}
	for s := late + 1; s < 32; s++ {
		read(s)
	}
}
