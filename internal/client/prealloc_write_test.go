package client_test

import (
	"context"
	"math/rand/v2"
	"testing"

	"poolfs/internal/client"
)

// TestWritePastEndIntoPreallocated: a stripe preallocated beyond the end
// of the file (fallocate with KEEP_SIZE) has a committed generation, and
// small writes into it pass the end of the file. Extents change no size,
// so they must not go to the delta log: the size they make is committed,
// and a new handle reads it and the bytes. (Before, the writes went to
// the log and the file had its old size again at the next open: found by
// `poolfs bench fsx`, seed 100.)
func TestWritePastEndIntoPreallocated(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		window int // StripesInFlight: small, write-backs in the background
		writes int
	}{
		{"flush's write-back", 64, 3},
		{"background write-backs", 1, 300},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn := startWith(t, client.Options{StripesInFlight: c.window})
			f := create(t, conn, "f")
			sb := client.StripeBytes(f.Attr().Layout)
			ref := make([]byte, sb+sb/2)
			fill(ref)
			if _, err := f.WriteAt(ctx, ref, 0); err != nil {
				t.Fatal(err)
			}
			if err := f.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			end := 5 * sb
			if err := f.Preallocate(ctx, 2*sb, end-2*sb, true); err != nil {
				t.Fatal(err)
			}
			if got := f.Attr().Size; got != uint64(len(ref)) {
				t.Fatalf("size %d after preallocating with keep-size, want %d", got, len(ref))
			}
			for range c.writes {
				off := 2*sb + rand.Int64N(end-2*sb-8<<10)
				p := make([]byte, 1+rand.IntN(8<<10))
				fill(p)
				if _, err := f.WriteAt(ctx, p, off); err != nil {
					t.Fatal(err)
				}
				if need := off + int64(len(p)); need > int64(len(ref)) {
					ref = append(ref, make([]byte, need-int64(len(ref)))...)
				}
				copy(ref[off:], p)
			}
			if err := f.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			f.Close()
			checkFile(t, fresh(conn), f.Attr().Ino, ref, "after small writes past the end into preallocated stripes")
		})
	}
}

func fill(p []byte) {
	for i := range p {
		p[i] = byte(rand.Uint32())
	}
}
