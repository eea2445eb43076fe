package client_test

import (
	"context"
	"testing"

	"poolfs/internal/client"
	"poolfs/internal/clustermap"
	"poolfs/internal/erasure"
	"poolfs/internal/meta"
)

// TestFoldReadsUncoveredBlocks: a fold reads of the stripe's generation
// only the checksum blocks its extents do not cover whole, and writes the
// same bytes as a fold that reads it all; with a data drive down it reads
// the stripe whole (reconstructing) and is as right.
func TestFoldReadsUncoveredBlocks(t *testing.T) {
	for _, down := range []bool{false, true} {
		conn := startWith(t, client.Options{DeltaBudget: 1 << 40})
		ctx := context.Background()
		sb := int(client.StripeBytes(meta.Layout{K: testK, M: testM, Unit: testUnit}))
		bs := erasure.BlockSize
		if testUnit%bs != 0 || sb < 4*bs {
			t.Fatalf("the test needs units of whole blocks and 4 blocks a stripe (unit %d)", testUnit)
		}
		f, ref := written(t, conn, "f", 2*sb)
		// Stripe 0: block 1 written whole (two writes, one extent), 4 KiB
		// of block 3; fewer than half its bytes, so they go to the log.
		for _, w := range []struct{ off, n int }{{bs, bs / 2}, {bs + bs/2, bs / 2}, {3*bs + 100, 4096}} {
			p := randomPiece(w.n)
			if _, err := f.WriteAt(ctx, p, int64(w.off)); err != nil {
				t.Fatal(err)
			}
			copy(ref[w.off:], p)
		}
		if err := f.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if n, _ := deltaStats(t, conn, f.Attr().Ino); n != 2 {
			t.Fatalf("%d extents, want 2", n)
		}
		if down {
			recs, err := conn.Meta.Stripes(ctx, f.Attr().Ino, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			id := recs[0].Drives[0]
			conn.Maps.Update(func(m *clustermap.Map) {
				for i := range m.Drives {
					if uint32(m.Drives[i].ID) == id {
						m.Drives[i].State = clustermap.StateDown
					}
				}
			})
		}
		src := &logReads{inner: conn.Drives}
		foldAllThrough(t, conn, src, f.Attr().Ino)
		got := src.baseBytes.Load()
		t.Logf("drive down %v: the fold read %d bytes of the generation", down, got)
		// Three of the four blocks, each with its fragment's header.
		if most := int64(3*bs + 3*4096); !down && (got > most || got < int64(3*bs)) {
			t.Fatalf("the fold read %d bytes of the generation, want 3 blocks of %d (at most %d)", got, bs, most)
		}
		if down && got < int64(testK*bs) {
			t.Fatalf("the fold read %d bytes with a drive down, want the stripe (%d fragments)", got, testK)
		}
		if n, _ := deltaStats(t, conn, f.Attr().Ino); n != 0 {
			t.Fatalf("%d extents left after FoldAll", n)
		}
		checkFile(t, fresh(conn), f.Attr().Ino, ref, "after the fold")
	}
}
