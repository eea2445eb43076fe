package fsck

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"poolfs/internal/chunkstore"
	"poolfs/internal/clustermap"
	"poolfs/internal/erasure"
	"poolfs/internal/meta"
	"poolfs/internal/placement"
	"poolfs/internal/storage"
)

// checkFile checks the stripe records of one file against the fragments.
func (r *run) checkFile(ctx context.Context, p string, ino meta.Ino) error {
	a, err := r.c.Store.Getattr(ctx, ino)
	if errors.Is(err, meta.ErrNotFound) {
		return nil // removed since the walk
	}
	if err != nil {
		return fmt.Errorf("fsck: %s: %w", p, err)
	}
	r.rep.Files++
	recs, bad, err := r.records(ctx, p, ino)
	if err != nil {
		return err
	}
	have := map[uint64]meta.StripeRec{}
	var sum uint64
	for _, rec := range recs {
		have[rec.Stripe] = rec
		if !meta.IsLogStripe(rec.Stripe) { // a log stripe's bytes are counted in the stripes its extents update
			sum += uint64(rec.Len)
		}
		r.rep.Stripes++
		r.markSeen(sid{ino, rec.Stripe}, rec.Gen)
		k, m := rec.Scheme(a.Layout.K)
		present := r.present(sid{ino, rec.Stripe}, rec.Gen)
		if len(present) < k+m {
			present = r.confirm(ctx, ino, rec, present)
		}
		switch {
		case len(present) < k:
			pr := r.add(Problem{Kind: ProblemUnreadableStripe, Path: p, Ino: ino, Stripe: rec.Stripe, Gen: rec.Gen,
				Detail: fmt.Sprintf("stripe %d generation %x has %d of %d+%d fragments, needs %d", rec.Stripe, rec.Gen, len(present), k, m, k)})
			if r.o.RebuildStripes {
				r.rebuild(ctx, a, pr, rec.Gen, true)
			}
		case len(present) < k+m:
			pr := r.add(Problem{Kind: ProblemMissingFragments, Path: p, Ino: ino, Stripe: rec.Stripe, Gen: rec.Gen,
				Detail: fmt.Sprintf("stripe %d generation %x: %d of %d+%d fragments missing", rec.Stripe, rec.Gen, k+m-len(present), k, m)})
			if r.o.Repair {
				r.rewrite(ctx, pr, a, rec, present)
			}
		}
	}
	lost := r.lostStripes(ino, have, a)
	if len(lost) > 0 || a.Stored > sum {
		// On a cluster in use, another client may have truncated the
		// file between the reads of its attributes and of its records:
		// a truncate leaves the fragments of the stripes it cut (until
		// the collector runs) and no records. Before reporting, the file
		// is judged by the smaller of the sizes read before and after
		// its records.
		switch a2, err := r.c.Store.Getattr(ctx, ino); {
		case errors.Is(err, meta.ErrNotFound):
			return nil // removed meanwhile
		case err != nil:
			return fmt.Errorf("fsck: %s: %w", p, err)
		default:
			a.Size, a.Stored = min(a.Size, a2.Size), min(a.Stored, a2.Stored)
			lost = r.lostStripes(ino, have, a)
		}
	}
	for _, s := range lost {
		what := "no record"
		if bad[s] != nil {
			what = bad[s].Error()
		}
		pr := r.add(Problem{Kind: ProblemLostRecord, Path: p, Ino: ino, Stripe: s,
			Detail: fmt.Sprintf("stripe %d has fragments on the drives and %s", s, what)})
		if r.o.RebuildStripes {
			if r.rebuild(ctx, a, pr, 0, false) {
				if rec, ok := r.restored(pr); ok {
					sum += uint64(rec.Len)
				}
			}
		}
	}
	for s, err := range bad {
		if !slices.Contains(lost, s) {
			r.add(Problem{Kind: meta.ProblemCorruptRecord, Path: p, Ino: ino, Stripe: s, Detail: err.Error()})
		}
	}
	if a.Stored > sum {
		r.add(Problem{Kind: ProblemLostBytes, Path: p, Ino: ino,
			Detail: fmt.Sprintf("%d bytes stored, the stripe records hold %d", a.Stored, sum)})
	}
	return nil
}

// lostStripes returns, in order, the stripes of file ino (attributes a)
// within its size that have fragments on the drives but no (readable)
// record in have.
func (r *run) lostStripes(ino meta.Ino, have map[uint64]meta.StripeRec, a meta.Attr) []uint64 {
	var lost []uint64
	for s := range r.frags {
		if s.ino == ino {
			if _, ok := have[s.stripe]; !ok && s.stripe < a.Size/stripeBytes(a.Layout)+1 && s.stripe*stripeBytes(a.Layout) < a.Size {
				lost = append(lost, s.stripe)
			}
		}
	}
	slices.Sort(lost)
	return lost
}

// records returns the file's decodable stripe records and, if some do not
// decode, the error of each such stripe (read one by one).
func (r *run) records(ctx context.Context, p string, ino meta.Ino) ([]meta.StripeRec, map[uint64]error, error) {
	recs, err := r.c.Store.Stripes(ctx, ino, 0, math.MaxUint64)
	if err == nil || !errors.Is(err, meta.ErrCorrupt) {
		if err != nil && !errors.Is(err, meta.ErrNotFound) {
			return nil, nil, fmt.Errorf("fsck: %s: %w", p, err)
		}
		return recs, nil, nil
	}
	// Some record does not decode: read the stripes one by one, those
	// known from the drives.
	bad := map[uint64]error{}
	recs = nil
	var stripes []uint64
	for s := range r.frags {
		if s.ino == ino {
			stripes = append(stripes, s.stripe)
		}
	}
	slices.Sort(stripes)
	for _, s := range stripes {
		one, err := r.c.Store.Stripes(ctx, ino, s, s)
		switch {
		case err == nil:
			recs = append(recs, one...)
		case errors.Is(err, meta.ErrCorrupt):
			bad[s] = err
		default:
			return nil, nil, fmt.Errorf("fsck: %s: %w", p, err)
		}
	}
	return recs, bad, nil
}

func (r *run) markSeen(s sid, gen uint64) {
	if r.seen[s] == nil {
		r.seen[s] = map[uint64]bool{}
	}
	r.seen[s][gen] = true
}

// present returns the fragments of generation gen found, one per index.
func (r *run) present(s sid, gen uint64) []loc {
	var out []loc
	for _, l := range r.frags[s][gen] {
		if !slices.ContainsFunc(out, func(o loc) bool { return o.index == l.index }) {
			out = append(out, l)
		}
	}
	return out
}

// confirm asks the drives of rec for the fragments the scan did not list:
// on a cluster in use, a write or a fold may have committed rec's
// generation after the scan of its drives, and its fragments are there.
// It returns present with those found added (and notes them as found).
func (r *run) confirm(ctx context.Context, ino meta.Ino, rec meta.StripeRec, present []loc) []loc {
	for i, id := range rec.Drives {
		if slices.ContainsFunc(present, func(l loc) bool { return l.index == i }) {
			continue
		}
		did := placement.DriveID(id)
		if d, err := r.c.Map.Drive(did); err != nil || d.State != clustermap.StateUp {
			continue
		}
		drv, err := r.c.Drives.Drive(r.c.Map, did)
		if err != nil {
			continue
		}
		key := erasure.FragmentKey{Ino: uint64(ino), Stripe: rec.Stripe, Gen: rec.Gen, Index: uint8(i)}
		if _, err := drv.ReadFragment(ctx, key, 0, chunkstore.Align, nil); err != nil {
			continue
		}
		l := loc{i, did}
		present = append(present, l)
		r.found(sid{ino, rec.Stripe}, rec.Gen, l)
	}
	return present
}

// rewrite re-writes the missing fragments of a readable stripe from the
// others, on the drives its record names (those that are up).
func (r *run) rewrite(ctx context.Context, pr *Problem, a meta.Attr, rec meta.StripeRec, present []loc) {
	if r.c.Rebuild == nil {
		return
	}
	k, m := rec.Scheme(a.Layout.K)
	args := &storage.ReconstructArgs{Ino: uint64(pr.Ino), Stripe: rec.Stripe, Gen: rec.Gen, K: k, M: m,
		Pool: a.Layout.Pool, StripeLen: rec.Len, ShardSize: rec.ShardSize}
	for _, l := range present {
		args.Sources = append(args.Sources, storage.FragmentAt{Index: l.index, Drive: l.drive})
	}
	for i, d := range rec.Drives {
		id := placement.DriveID(d)
		dd, err := r.c.Map.Drive(id)
		if err != nil || dd.State != clustermap.StateUp ||
			slices.ContainsFunc(present, func(l loc) bool { return l.index == i }) {
			continue
		}
		args.Targets = append(args.Targets, storage.FragmentAt{Index: i, Drive: id})
	}
	if len(args.Targets) == 0 {
		return // on drives that are not up: the rebuild coordinator's work
	}
	res, err := r.c.Rebuild.Reconstruct(ctx, args)
	if err != nil {
		pr.Detail += fmt.Sprintf("; re-write failed: %v", err)
		return
	}
	r.rep.Rewritten += res.Written
	pr.Repaired = res.Written == len(args.Targets) && len(args.Targets)+len(present) == k+m
}
