package client_test

import (
	"context"
	"testing"
	"time"

	"poolfs/internal/client"
	"poolfs/internal/erasure"
	"poolfs/internal/meta"
)

// TestFoldWaitsForLateParts: a fold reads the parts of its stripe's
// extents from their log stripe by ranged reads, and waits for them when
// every drive is slower than the hedging bound (busy drives), instead of
// reading the whole log stripe in place of each late part; the file then
// reads byte for byte as written. Before, a late part made the fold read
// the whole log stripe: on busy drives, most of what the folds of random
// writes read.
func TestFoldWaitsForLateParts(t *testing.T) {
	for _, tc := range []struct {
		name string
		slow time.Duration
	}{
		{"drives quick", 0},
		{"drives later than the cold bound", 150 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn := startWith(t, client.Options{StripesInFlight: 2, DeltaBudget: 1 << 40})
			ctx := context.Background()
			const stripes = 4
			sb := int(client.StripeBytes(meta.Layout{K: testK, M: testM, Unit: testUnit}))
			f, ref := written(t, conn, "f", stripes*sb)
			// 16 writes of 4 KiB per stripe, apart: extents of a quarter of
			// each stripe, packed into one log stripe of the file's layout.
			var ext int64
			for s := range stripes {
				for i := range 16 {
					p := make([]byte, 4<<10)
					for j := range p {
						p[j] = byte(s*31 + i*7 + j)
					}
					off := s*sb + i*(sb/16)
					if _, err := f.WriteAt(ctx, p, int64(off)); err != nil {
						t.Fatal(err)
					}
					copy(ref[off:], p)
					ext += int64(len(p))
				}
			}
			if err := f.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			if n, logs := deltaStats(t, conn, f.Attr().Ino); n != 16*stripes || logs == 0 {
				t.Fatalf("%d extents in %d log stripes, want %d in at least one", n, logs, 16*stripes)
			}
			for _, d := range conn.Drives {
				d.SlowDown(tc.slow)
			}
			src := &logReads{inner: conn.Drives}
			foldAllThrough(t, conn, src, f.Attr().Ino)
			// A stripe's extents lie side by side in the log stripe (64 KiB
			// of them), read as one range of whole checksum blocks, with
			// the fragment's header once: about 68 KiB a fold. A whole log
			// stripe in place of a late part is its 256 KiB of data.
			t.Logf("the folds read %d bytes of log stripes", src.bytes.Load())
			if got, most := src.bytes.Load(), int64(stripes*3*erasure.BlockSize/2); got > most {
				t.Fatalf("the folds read %d bytes of log stripes for %d bytes of extents, want at most %d (ranged reads)", got, ext, most)
			}
			if n, _ := deltaStats(t, conn, f.Attr().Ino); n != 0 {
				t.Fatalf("%d extents left after FoldAll", n)
			}
			for _, d := range conn.Drives {
				d.SlowDown(0)
			}
			checkFile(t, fresh(conn), f.Attr().Ino, ref, "after folding on slow drives")
		})
	}
}
