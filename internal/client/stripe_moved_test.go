package client

import (
	"context"
	"errors"
	"testing"

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
	// Nothing changed: the loss is reported.
	f.drives[6].Remove(f.key(0))
	f.c.meta = &recordsOnly{rec: moved}
	f.rec = moved
	if err := f.read(ctx); !errors.Is(err, ErrDataLoss) {
		t.Fatalf("read of a stripe missing three fragments: %v, want ErrDataLoss", err)
	}
}
