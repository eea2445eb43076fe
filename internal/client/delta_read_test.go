package client_test

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"poolfs/internal/chunkstore"
	"poolfs/internal/client"
	"poolfs/internal/clustermap"
	"poolfs/internal/erasure"
	"poolfs/internal/meta"
	"poolfs/internal/placement"
)

// logReads counts the fragment reads of log stripes made through it, and
// the bytes they read; and the bytes read of other stripes' fragments.
type logReads struct {
	inner     client.Drives
	n         atomic.Int64
	bytes     atomic.Int64
	baseBytes atomic.Int64
}

func (r *logReads) Drive(m *clustermap.Map, id placement.DriveID) (chunkstore.Drive, error) {
	d, err := r.inner.Drive(m, id)
	if err != nil {
		return nil, err
	}
	return &logReadDrive{Drive: d, r: r}, nil
}

type logReadDrive struct {
	chunkstore.Drive
	r *logReads
}

func (d *logReadDrive) ReadFragment(ctx context.Context, key erasure.FragmentKey, off, n int64, dst []byte) ([]byte, error) {
	b, err := d.Drive.ReadFragment(ctx, key, off, n, dst)
	if meta.IsLogStripe(key.Stripe) {
		d.r.n.Add(1)
		d.r.bytes.Add(int64(len(b)))
	} else {
		d.r.baseBytes.Add(int64(len(b)))
	}
	return b, err
}

// foldAllThrough folds every stripe of file ino that has extents with a
// new client reading through drives.
func foldAllThrough(t *testing.T, conn *conn, drives client.Drives, ino meta.Ino) {
	t.Helper()
	ctx := context.Background()
	g, err := client.New(conn.Meta, conn.Maps, drives, client.Options{DeltaBudget: 1 << 40}).Open(ctx, ino, "f")
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := g.FoldAll(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestDeltaPartsReadTogether: the extents that one write-back packed side
// by side in a log stripe (many small writes into one stripe) are read
// from it as one range, not one read each, and the stripe reads byte for
// byte as a reference copy with the writes applied.
func TestDeltaPartsReadTogether(t *testing.T) {
	conn := start(t)
	ctx := context.Background()
	const stripe = testK * testUnit
	f, ref := written(t, conn, "f", stripe)
	ino := f.Attr().Ino
	// 16 writes of 512 bytes, 8 KiB apart: 16 extents, not adjacent in
	// the stripe, side by side in one log stripe.
	for i := range 16 {
		p := make([]byte, 512)
		for j := range p {
			p[j] = byte(rand.Uint32())
		}
		off := i * 8 << 10
		if _, err := f.WriteAt(ctx, p, int64(off)); err != nil {
			t.Fatal(err)
		}
		copy(ref[off:], p)
	}
	if err := f.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if ext, logs := deltaStats(t, conn, ino); ext != 16 || logs != 1 {
		t.Fatalf("16 small writes left %d extents in %d log stripes, want 16 in 1", ext, logs)
	}
	counted := &logReads{inner: conn.Drives}
	n := *conn
	n.Client = client.New(conn.Meta, conn.Maps, counted, client.Options{})
	g, err := n.Client.Open(ctx, ino, "f")
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	got := make([]byte, stripe)
	if _, err := g.ReadAt(ctx, got, 0); err != nil {
		t.Fatal(err)
	}
	if i := firstDiff(got, ref); i >= 0 {
		t.Fatalf("stripe read differs at byte %d", i)
	}
	// One ranged read, and at most one of the fragment's header.
	if r := counted.n.Load(); r > 2 {
		t.Fatalf("reading 16 extents packed side by side took %d log stripe reads, want at most 2", r)
	}
	checkFile(t, fresh(conn), ino, ref, "fresh client")
}

// TestFoldsTakeLogFromCache: the folds of the client that wrote the log
// stripes take the extents' bytes from its log cache and read no log
// stripe from the drives; without the cache they read them; either way
// the file reads as the reference copy, byte for byte.
func TestFoldsTakeLogFromCache(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cache    int64
		logReads bool
	}{
		{"cache", 0, false},
		{"no cache", -1, true},
		{"cache too small for a log stripe", 4 << 10, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn := start(t)
			ctx := context.Background()
			const size = 16 * testK * testUnit
			g, ref := written(t, conn, "f", size)
			g.Close()
			counted := &logReads{inner: conn.Drives}
			w := *conn
			w.Client = client.New(conn.Meta, conn.Maps, counted, client.Options{DeltaBudget: 1 << 40, LogCache: tc.cache})
			f := reopen(t, &w, g)
			randomWrites(t, f, ref, 200, 8<<10)
			ino := f.Attr().Ino
			if ext, _ := deltaStats(t, conn, ino); ext == 0 {
				t.Fatal("no extents to fold")
			}
			before := counted.n.Load()
			if err := f.FoldAll(ctx); err != nil {
				t.Fatal(err)
			}
			f.Close()
			if ext, logs := deltaStats(t, conn, ino); ext != 0 || logs != 0 {
				t.Fatalf("after FoldAll: %d extents, %d log stripes", ext, logs)
			}
			if n := counted.n.Load() - before; (n > 0) != tc.logReads {
				t.Fatalf("the folds read log stripes from the drives %d times; want reads: %v", n, tc.logReads)
			}
			checkFile(t, fresh(conn), ino, ref, "after the folds")
		})
	}
}
