package scrub

import (
	"context"
	"errors"
	"slices"

	"poolfs/internal/chunkstore"
	"poolfs/internal/clustermap"
	"poolfs/internal/erasure"
	"poolfs/internal/meta"
	"poolfs/internal/placement"
	"poolfs/internal/recovery"
	"poolfs/internal/stripeio"
)

// result is what checking one stripe found.
type result struct {
	bytes                           int64
	missing, checksum, inconsistent int
	repaired                        int
	skipped, unrecoverable          bool
}

// checkStripe reads every fragment of one stripe, classifies the bad ones
// and rewrites them, checking parity with the stripe's own scheme (for a
// mirror: that the copies agree; one differing copy is outvoted). A stripe
// that changed since the scan (rewritten, or moved by a rebuild) or has a
// fragment on a drive that is not up is skipped: the collector and the
// rebuild own those.
func (s *Scheduler) checkStripe(ctx context.Context, pool *clustermap.Pool, st recovery.Stripe, rec meta.StripeRec) result {
	var r result
	cds := &s.codecs
	k, par := rec.Scheme(pool.K)
	if k < 1 || par < 0 || k+par > pool.K+pool.M {
		r.skipped = true
		return r
	}
	cd, err := cds.Get(k, par)
	if err != nil {
		r.skipped = true
		return r
	}
	m, err := s.d.Maps.Map(ctx)
	if err != nil {
		r.skipped = true
		return r
	}
	for _, id := range rec.Drives {
		if d, err := m.Drive(placement.DriveID(id)); err != nil || d.State != clustermap.StateUp {
			r.skipped = true
			return r
		}
	}
	width, sz := k+par, int(rec.ShardSize)
	fs := &stripeio.Stripe{Ino: st.Ino, Stripe: st.Stripe, Gen: rec.Gen, K: k, M: par, Pool: pool.ID, Len: rec.Len, ShardSize: sz}
	at := stripeio.OnMap(s.d.Drives, m)
	if len(rec.Drives) != width {
		r.skipped = true // not a record of this scheme: fsck's to report
		return r
	}
	f := &stripeio.Fetch{Stripe: fs, Need: width, At: at}
	for i, id := range rec.Drives {
		f.Sources = append(f.Sources, stripeio.Loc{Index: i, Drive: placement.DriveID(id)})
	}
	got, err := f.Get(ctx)
	if err != nil || ctx.Err() != nil {
		r.skipped = true
		return r
	}
	shards := got.Shards
	kinds := got.Errs // why fragment i is bad, nil if good
	var bad []int
	for i, e := range kinds {
		if e == nil {
			r.bytes += int64(erasure.FragmentSize(sz))
		} else {
			bad = append(bad, i)
		}
	}
	if len(bad) == 0 {
		if ok, err := cd.Verify(shards); err == nil && !ok {
			i, found := locateInconsistent(cd, shards)
			if !found {
				r.unrecoverable = s.stillCommitted(ctx, rec, st)
				r.inconsistent = 1
				return r
			}
			shards[i], kinds[i], bad = nil, errInconsistent, []int{i}
		}
	}
	if len(bad) == 0 {
		return r
	}
	if !s.stillCommitted(ctx, rec, st) {
		r.skipped = true
		return r
	}
	for _, i := range bad {
		switch {
		case errors.Is(kinds[i], errInconsistent):
			r.inconsistent++
		case errors.Is(kinds[i], chunkstore.ErrNotFound):
			r.missing++
		default:
			r.checksum++
		}
	}
	if len(bad) > par {
		r.unrecoverable = true
		return r
	}
	for _, i := range bad {
		shards[i] = nil
	}
	if err := stripeio.Reconstruct(cds, fs, shards, bad); err != nil {
		r.unrecoverable = true
		return r
	}
	targets := make([]stripeio.Loc, len(bad))
	frags := make([][]byte, len(bad))
	for j, i := range bad {
		targets[j], frags[j] = stripeio.Loc{Index: i, Drive: placement.DriveID(rec.Drives[i])}, stripeio.NewFragment(fs, shards[i])
	}
	for j, err := range stripeio.WriteFragments(ctx, at, fs, targets, frags) {
		i := bad[j]
		if err != nil {
			s.d.Log.Warn("scrub repair failed", "stripe", st.String(), "index", i, "err", err)
			continue
		}
		s.d.Log.Info("scrub repair", "stripe", st.String(), "index", i, "drive", placement.DriveID(rec.Drives[i]).String(), "cause", kinds[i])
		r.repaired++
	}
	return r
}

var errInconsistent = errors.New("scrub: fragment inconsistent with the stripe's parity")

// locateInconsistent finds the one fragment whose replacement by a
// reconstruction from the others makes the stripe consistent. With m ≥ 2
// a single bad fragment is found; found is false otherwise.
func locateInconsistent(cd *erasure.Codec, shards [][]byte) (int, bool) {
	if cd.M() < 2 {
		return 0, false
	}
	hit, n := 0, 0
	for i := range shards {
		try := slices.Clone(shards)
		try[i] = nil
		if err := cd.Reconstruct(try, false); err != nil {
			continue
		}
		if ok, err := cd.Verify(try); err == nil && ok {
			hit, n = i, n+1
		}
	}
	return hit, n == 1
}

// stillCommitted reports whether the stripe still has generation
// rec.Gen on the same drives (not rewritten or moved since the scan).
func (s *Scheduler) stillCommitted(ctx context.Context, rec meta.StripeRec, st recovery.Stripe) bool {
	rs, err := s.d.Stripes.Stripes(ctx, meta.Ino(st.Ino), st.Stripe, st.Stripe)
	return err == nil && len(rs) == 1 && rs[0].Gen == rec.Gen && slices.Equal(rs[0].Drives, rec.Drives)
}
