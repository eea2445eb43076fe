package cluster

import (
	"bytes"
	"context"
	"testing"

	"poolfs/internal/placement"
)

// TestFileStripesFollowTheStripeOrder writes a file of 48 stripes through
// the client: every stripe's record names the PG the map's stripe order
// gives (placement.StripeOrder; before, the uniform hash placement.PGOf)
// and that PG's drives, and the file reads back byte for byte.
func TestFileStripesFollowTheStripeOrder(t *testing.T) {
	_, conn := startTest(t, Config{Drives: 12, Unit: 16 << 10})
	ctx := context.Background()
	f := createFile(t, conn, "striped")
	data := randBytes(t, 48*8*16<<10)
	if _, err := f.WriteAt(ctx, data, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, reopen(t, conn, f)); !bytes.Equal(got, data) {
		t.Fatal("content differs")
	}
	pm := poolPGMap(t, conn)
	o := placement.NewStripeOrder(pm)
	a, recs := stripeRecs(t, conn, "/striped")
	if len(recs) != 48 {
		t.Fatalf("%d stripe records, want 48", len(recs))
	}
	for _, r := range recs {
		want := o.PG(uint64(a.Ino), r.Stripe)
		if r.PG != want {
			t.Fatalf("stripe %d in PG %d, the stripe order gives %d", r.Stripe, r.PG, want)
		}
		for i, d := range r.Drives {
			if placement.DriveID(d) != pm.Sets[want][i] {
				t.Fatalf("stripe %d: drives %v, PG %d set %v", r.Stripe, r.Drives, want, pm.Sets[want])
			}
		}
	}
}
