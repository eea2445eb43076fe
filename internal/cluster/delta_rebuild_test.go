package cluster

import (
	"bytes"
	"context"
	"math/rand/v2"
	"testing"

	"poolfs/internal/meta"
)

// TestRebuildDeltaLog: a file whose small writes live in delta log
// stripes reads byte for byte as a reference copy after a drive failed
// and the pool rebuilt: log stripes are ordinary stripes to rebuild (PG
// index), and every stripe, log stripes included, is healthy after it.
func TestRebuildDeltaLog(t *testing.T) {
	c, conn := startRebuildTest(t, Config{Drives: 12})
	ctx := context.Background()
	ref := randBytes(t, 3<<20+777)
	put(t, conn, "/f", ref)
	a, err := conn.Meta.Lookup(ctx, meta.RootIno, "f")
	if err != nil {
		t.Fatal(err)
	}
	f, err := conn.Client.Open(ctx, a.Ino, "f")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		p := randBytes(t, 1+rand.IntN(8<<10))
		off := rand.IntN(len(ref) - len(p))
		if _, err := f.WriteAt(ctx, p, int64(off)); err != nil {
			t.Fatal(err)
		}
		copy(ref[off:], p)
		if i%40 == 39 {
			if err := f.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := f.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	f.WaitFolds()
	recs, err := conn.Meta.Stripes(ctx, a.Ino, 0, ^uint64(0))
	if err != nil {
		t.Fatal(err)
	}
	logs := 0
	for _, r := range recs {
		if meta.IsLogStripe(r.Stripe) {
			logs++
		}
	}
	if logs == 0 {
		t.Fatal("no log stripes: the writes were not logged")
	}
	if err := conn.Mgmt.FailDrive(ctx, 3); err != nil {
		t.Fatal(err)
	}
	h := waitHealthy(t, c)
	if h.Healthy != h.Stripes || h.Stripes < len(recs) {
		t.Fatalf("after rebuild: %+v, file has %d stripes with %d log stripes", h, len(recs), logs)
	}
	verifyFiles(t, conn, map[string][]byte{"/f": ref})
	g, err := conn.Client.Open(ctx, a.Ino, "f")
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(ref))
	if n, err := g.ReadAt(ctx, got, 0); n != len(ref) || err != nil {
		t.Fatalf("read %d: %v", n, err)
	}
	if !bytes.Equal(got, ref) {
		t.Fatal("file differs from the reference after rebuild")
	}
}
