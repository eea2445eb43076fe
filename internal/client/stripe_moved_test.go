package client

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"poolfs/internal/chunkstore/drivetest"
	"poolfs/internal/clustermap"
	"poolfs/internal/meta"
	"poolfs/internal/placement"
)

// recordsOnly answers Stripes with one record; no other Meta method is
// called by a stripe read.
type recordsOnly struct {
	Meta
	rec meta.StripeRec
}

func (r *recordsOnly) Stripes(ctx context.Context, ino meta.Ino, first, last uint64) ([]meta.StripeRec, error) {
	return []meta.StripeRec{r.rec}, nil
}

// TestStripeMovedUnderAStaleRecordReadsAgain: a resync moved two fragments
// to other drives (and deleted the old copies) after the reader took the
// stripe's record, and two more drives are down: with the old record only
// two fragments remain, with the new one four. The read fetches the record
// again instead of reporting data loss.
func TestStripeMovedUnderAStaleRecordReadsAgain(t *testing.T) {
	ctx := context.Background()
	f := newStripeFixture(t, 4, 2, Options{})
	moved := f.rec
	moved.Drives = append([]uint32(nil), f.rec.Drives...)
	for i, to := range []placement.DriveID{6, 7} {
		from := placement.DriveID(f.rec.Drives[i])
		d := drivetest.New(to.String())
		d.Put(f.key(i), f.drives[from].Fragment(f.key(i)))
		f.drives[to] = d
		f.drives[from].Remove(f.key(i))
		moved.Drives[i] = uint32(to)
	}
	f.maps.Update(func(m *clustermap.Map) {
		m.Drives = append(m.Drives, clustermap.Drive{ID: 6, State: clustermap.StateUp}, clustermap.Drive{ID: 7, State: clustermap.StateUp})
		for i := range m.Drives {
			if m.Drives[i].ID == 2 || m.Drives[i].ID == 3 {
				m.Drives[i].State = clustermap.StateDown
			}
		}
	})
	f.c.meta = &recordsOnly{rec: moved}
	if err := f.read(ctx); err != nil {
		t.Fatalf("read with a record older than a resync: %v", err)
	}
	// Nothing changed: with two of the three missing fragments on drives
	// that are down, the stripe is unavailable; with those drives failed,
	// it is lost.
	f.drives[6].Remove(f.key(0))
	f.c.meta = &recordsOnly{rec: moved}
	f.rec = moved
	if err := f.read(ctx); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("read of a stripe missing three fragments, two on down drives: %v, want ErrUnavailable", err)
	}
	f.maps.Update(func(m *clustermap.Map) {
		for i := range m.Drives {
			if m.Drives[i].ID == 2 || m.Drives[i].ID == 3 {
				m.Drives[i].State = clustermap.StateFailed
			}
		}
	})
	if err := f.read(ctx); !errors.Is(err, ErrDataLoss) {
		t.Fatalf("read of a stripe missing three fragments, two on failed drives: %v, want ErrDataLoss", err)
	}
}

// TestDownDrivesReadLast: fragments on drives the map says are down are
// not asked for while the others suffice, and are read when the stripe
// cannot be read without them (down is a drive that did not answer a
// probe; it lost nothing), byte for byte.
func TestDownDrivesReadLast(t *testing.T) {
	for _, tc := range []struct {
		down      []placement.DriveID
		wantAsked int // down drives asked
	}{
		{[]placement.DriveID{1}, 0},
		{[]placement.DriveID{0, 5}, 0},
		{[]placement.DriveID{0, 1, 2}, 1},
		{[]placement.DriveID{0, 1, 2, 3, 4, 5}, 4},
	} {
		t.Run(fmt.Sprint(tc.down), func(t *testing.T) {
			f := newStripeFixture(t, 4, 2, Options{})
			// Down drives answer; no hedged reads (they would ask more).
			f.c = New(nil, f.maps, f.drives, Options{HedgeFloor: time.Hour})
			f.maps.Update(func(m *clustermap.Map) {
				for _, id := range tc.down {
					m.Drives[id].State = clustermap.StateDown
				}
			})
			if err := f.read(context.Background()); err != nil {
				t.Fatal(err)
			}
			asked := 0
			for _, id := range tc.down {
				if f.drives[id].Reads() > 0 {
					asked++
				}
			}
			if asked != tc.wantAsked {
				t.Fatalf("%d down drives asked, want %d", asked, tc.wantAsked)
			}
		})
	}
}
