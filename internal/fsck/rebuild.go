package fsck

import (
	"context"
	"fmt"
	"slices"

	"poolfs/internal/erasure"
	"poolfs/internal/meta"
	"poolfs/internal/placement"
)

// rebuild recreates the record of the stripe of problem pr from the
// fragments on the drives: the newest generation with at least k
// fragments that read back whole. With hasRec, the stripe has a record of
// generation cur, which only a newer generation replaces. It reports
// whether a record was restored.
func (r *run) rebuild(ctx context.Context, a meta.Attr, pr *Problem, cur uint64, hasRec bool) bool {
	s := sid{pr.Ino, pr.Stripe}
	gens := make([]uint64, 0, len(r.frags[s]))
	for g := range r.frags[s] {
		if !hasRec || g > cur {
			gens = append(gens, g)
		}
	}
	slices.Sort(gens)
	slices.Reverse(gens)
	for _, g := range gens {
		rec, err := r.verify(ctx, a, s, g)
		if err != nil {
			pr.Detail += fmt.Sprintf("; generation %x: %v", g, err)
			continue
		}
		old := uint64(0)
		if hasRec {
			old = cur
		}
		if err := r.c.Store.RestoreStripe(ctx, s.ino, rec, old); err != nil {
			pr.Detail += fmt.Sprintf("; restore generation %x: %v", g, err)
			return false
		}
		r.markSeen(s, g)
		r.rep.Restored++
		pr.Repaired = true
		pr.Gen = g
		pr.Detail += fmt.Sprintf("; record of generation %x restored from %d+%d fragments", g, rec.K, len(rec.Drives)-rec.K)
		return true
	}
	if len(gens) == 0 {
		if hasRec && len(r.frags[s]) > 0 {
			pr.Detail += "; the drives hold only older generations, which never replace a record"
		} else {
			pr.Detail += "; no other generation on the drives"
		}
	}
	return false
}

// restored returns the record restored for the stripe of pr.
func (r *run) restored(pr *Problem) (meta.StripeRec, bool) {
	if !pr.Repaired {
		return meta.StripeRec{}, false
	}
	recs, err := r.c.Store.Stripes(context.Background(), pr.Ino, pr.Stripe, pr.Stripe)
	if err != nil || len(recs) != 1 {
		return meta.StripeRec{}, false
	}
	return recs[0], true
}

// verify reads every fragment of generation gen of stripe s found on the
// drives, checks it whole (header and every block CRC) and that the
// headers agree, and returns the record that names them if at least k
// did. Indexes with no good fragment are placed on the drives of the
// stripe's placement group that hold none of the others (scrub or a
// --repair run re-writes them).
func (r *run) verify(ctx context.Context, a meta.Attr, s sid, gen uint64) (meta.StripeRec, error) {
	var (
		first *erasure.Header
		good  = map[int]placement.DriveID{}
	)
	for _, l := range r.frags[s][gen] {
		if _, ok := good[l.index]; ok {
			continue
		}
		h, err := r.readFragment(ctx, l, erasure.FragmentKey{Ino: uint64(s.ino), Stripe: s.stripe, Gen: gen, Index: uint8(l.index)})
		if err != nil {
			continue
		}
		if first == nil {
			first = &h
		} else if h.K != first.K || h.M != first.M || h.Pool != first.Pool || h.StripeLen != first.StripeLen || h.ShardSize != first.ShardSize {
			continue
		}
		good[l.index] = l.drive
	}
	if first == nil || len(good) < first.K {
		return meta.StripeRec{}, fmt.Errorf("%d fragments read back whole, fewer than k", len(good))
	}
	if first.Pool != a.Layout.Pool {
		return meta.StripeRec{}, fmt.Errorf("fragments of pool %d, the file is in pool %d", first.Pool, a.Layout.Pool)
	}
	pool, err := r.c.Map.Placement(first.Pool)
	if err != nil {
		return meta.StripeRec{}, err
	}
	pm, err := pool.Map()
	if err != nil {
		return meta.StripeRec{}, err
	}
	o := r.orders[first.Pool]
	if o == nil {
		o = placement.NewStripeOrder(pm)
		r.orders[first.Pool] = o
	}
	pg := stripePG(pm, o, first.Pool, uint64(s.ino), s.stripe, good)
	rec := meta.StripeRec{Stripe: s.stripe, Gen: gen, PG: pg, Len: first.StripeLen, ShardSize: first.ShardSize,
		Drives: make([]uint32, first.K+first.M), K: first.K}
	used := map[placement.DriveID]bool{}
	for _, d := range good {
		used[d] = true
	}
	set := pm.Sets[pg]
	for i := range rec.Drives {
		if d, ok := good[i]; ok {
			rec.Drives[i] = uint32(d)
			continue
		}
		j := slices.IndexFunc(set, func(d placement.DriveID) bool { return !used[d] })
		if j < 0 {
			return meta.StripeRec{}, fmt.Errorf("placement group %d has no drive left for fragment %d", pg, i)
		}
		used[set[j]] = true
		rec.Drives[i] = uint32(set[j])
	}
	return rec, nil
}

// readFragment reads one fragment whole and checks it: its header, that
// it is the fragment asked for, and every block CRC.
func (r *run) readFragment(ctx context.Context, l loc, key erasure.FragmentKey) (erasure.Header, error) {
	d, err := r.c.Drives.Drive(r.c.Map, l.drive)
	if err != nil {
		return erasure.Header{}, err
	}
	b, err := d.ReadFragment(ctx, key, 0, -1, nil)
	if err != nil {
		return erasure.Header{}, err
	}
	h, _, err := erasure.DecodeFragment(b)
	if err != nil {
		return erasure.Header{}, err
	}
	if h.Key != key {
		return erasure.Header{}, fmt.Errorf("%w: fragment %v holds %v", erasure.ErrCorrupt, key, h.Key)
	}
	return h, nil
}

// stripePG returns the PG of a stripe whose record is lost: where the
// map's stripe order puts it (placement.StripeOrder, how clients place
// stripes) or where the uniform hash that placed stripes before the order
// put it (placement.PGOf: files written then keep their PGs), whichever
// PG's drives hold more of the fragments found (the order's on a tie).
func stripePG(pm *placement.PGMap, o *placement.StripeOrder, pool uint32, ino, stripe uint64, good map[int]placement.DriveID) uint32 {
	held := func(pg uint32) int {
		n := 0
		for _, d := range good {
			if slices.Contains(pm.Sets[pg], d) {
				n++
			}
		}
		return n
	}
	pg, old := o.PG(ino, stripe), placement.PGOf(pool, ino, stripe, len(pm.Sets))
	if held(old) > held(pg) {
		return old
	}
	return pg
}
