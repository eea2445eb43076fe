package meta

import (
	"context"
	"fmt"
	"math"
)

// NoDrive in GCItem.Drives means "no fragment to delete at this index".
const NoDrive = math.MaxUint32

// Stripes returns the committed stripe records of file ino with stripe
// numbers in [first, last], ascending, each with its delta extents
// (StripeRec.Deltas); stripes never written (holes) are absent. Log
// stripes (numbered from LogStripeBase on) are listed when the range
// reaches them. The caller owns the result. Errors: ErrNotFound,
// ErrCorrupt.
func (s *Store) Stripes(ctx context.Context, ino Ino, first, last uint64) ([]StripeRec, error) {
	var out []StripeRec
	err := s.view(ctx, func(o *op) error {
		out = out[:0]
		if _, err := o.inode(ino); err != nil {
			return err
		}
		recs, err := o.scanStripes(ino, first, last)
		if err == nil {
			err = o.attachDeltas(ino, recs, first, last)
		}
		for _, r := range recs {
			out = append(out, r.StripeRec)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("stripes %d..%d of %d: %w", first, last, ino, err)
	}
	return out, nil
}

func (o *op) scanStripes(ino Ino, first, last uint64) ([]storedStripe, error) {
	end := prefixEnd(stripePrefix(ino))
	if last < math.MaxUint64 {
		end = stripeKey(ino, last+1)
	}
	var out []storedStripe
	var derr error
	err := o.tx.Scan(stripeKey(ino, first), end, 0, func(k, v []byte) bool {
		r, err := decodeStripe(ino, stripeFromKey(k), v)
		if err != nil {
			derr = err
			return false
		}
		out = append(out, r)
		return true
	})
	if err == nil {
		err = derr
	}
	return out, err
}

func (o *op) stripe(ino Ino, stripe uint64) (storedStripe, bool, error) {
	v, ok, err := o.get(stripeKey(ino, stripe))
	if err != nil || !ok {
		return storedStripe{}, false, err
	}
	r, err := decodeStripe(ino, stripe, v)
	return r, err == nil, err
}

// CommitStripes makes new stripe generations of file ino visible, all or
// nothing. For each commit the stripe's current generation (0: none) must
// equal OldGen, and its delta extents must be those the writer saw
// (StripeCommit.Deltas), else it returns a *ConflictError naming every
// stale stripe and changes nothing. Each Rec.Gen must be greater than its
// OldGen and Drives must have the file layout's width. On success the old
// generations go to the GC queue, the stripes' delta extents are deleted
// (log stripes they empty go to the GC queue too), the PG index and the
// pool usage follow, the size becomes max(size, newSize), mtime becomes
// mtime (0: now) and ctime now. If the pool has a limit and the commit
// would grow its usage beyond it, it returns ErrPoolFull and changes
// nothing. Other errors: ErrNotFound, ErrIsDir, ErrInvalid.
func (s *Store) CommitStripes(ctx context.Context, ino Ino, commits []StripeCommit, newSize uint64, mtime int64) (Attr, error) {
	if err := checkCommits(commits); err != nil {
		return Attr{}, fmt.Errorf("commit stripes of %d: %w", ino, err)
	}
	var a Attr
	err := s.update(ctx, func(o *op) error {
		n, err := o.commitStripes(ino, commits, false)
		if err != nil {
			return err
		}
		n.Size = max(n.Size, newSize)
		a = o.touched(&n, mtime)
		return o.putInode(&n)
	})
	if err != nil {
		return Attr{}, fmt.Errorf("commit %d stripes of %d: %w", len(commits), ino, err)
	}
	return a, nil
}

// FoldStripes is CommitStripes for new generations that hold the same
// content as the old ones with their delta extents up to StripeCommit.Deltas
// (a fold): those extents are deleted, and the extents committed since
// (sequence numbers beyond Deltas) stay, over the new generation, since
// they were laid over the folded ones; size, mtime and ctime stay. So a
// fold never loses to a writer that adds extents meanwhile. Errors as
// CommitStripes.
func (s *Store) FoldStripes(ctx context.Context, ino Ino, commits []StripeCommit) error {
	if err := checkCommits(commits); err != nil {
		return fmt.Errorf("fold stripes of %d: %w", ino, err)
	}
	for _, c := range commits {
		if c.Deltas == FoldAll {
			return fmt.Errorf("fold of stripe %d with FoldAll: %w", c.Rec.Stripe, ErrInvalid)
		}
	}
	err := s.update(ctx, func(o *op) error {
		n, err := o.commitStripes(ino, commits, true)
		if err != nil {
			return err
		}
		return o.putInode(&n)
	})
	if err != nil {
		return fmt.Errorf("fold %d stripes of %d: %w", len(commits), ino, err)
	}
	return nil
}

// commitStripes is the body of CommitStripes and FoldStripes (fold: the
// extents beyond each commit's Deltas stay, over the new generation): it
// returns the inode with Stored updated, for the caller to finish and
// store.
func (o *op) commitStripes(ino Ino, commits []StripeCommit, fold bool) (inode, error) {
	n, err := o.file(ino)
	if err != nil {
		return n, err
	}
	if err := o.countStored(&n); err != nil {
		return n, err
	}
	olds := make([]storedStripe, len(commits))
	var conflicts []uint64
	for i, c := range commits {
		if err := c.Rec.fits(n.Layout); err != nil {
			return n, err
		}
		var old storedStripe
		var ok bool
		if n.clean&cleanNoStripes == 0 { // a new file's first commit reads nothing
			if old, ok, err = o.stripe(ino, c.Rec.Stripe); err != nil {
				return n, err
			}
		}
		if !ok && c.OldGen != 0 || ok && old.Gen != c.OldGen {
			conflicts = append(conflicts, c.Rec.Stripe)
		} else if ok && c.Deltas != FoldAll && !fold {
			ds, err := o.deltas(ino, c.Rec.Stripe, c.Rec.Stripe)
			if err != nil {
				return n, err
			}
			if len(ds) > 0 && ds[len(ds)-1].Seq > c.Deltas {
				conflicts = append(conflicts, c.Rec.Stripe)
			}
		}
		olds[i] = old
	}
	if conflicts != nil {
		return n, newConflict(ino, conflicts)
	}
	var grow int64
	u := o.usage(ino, commits[0].Rec.Stripe)
	for i, c := range commits {
		rec := storedStripe{StripeRec: c.Rec, Pool: n.Layout.Pool}
		rec.Drives = append([]uint32(nil), c.Rec.Drives...)
		rec.Deltas = nil
		if olds[i].Gen != 0 {
			if err := o.dropStripe(ino, &olds[i], u); err != nil {
				return n, err
			}
			if olds[i].Pool == rec.Pool {
				grow -= olds[i].raw()
			}
			upTo := FoldAll
			if fold {
				upTo = c.Deltas
			}
			if err := o.foldDeltas(ino, rec.Stripe, upTo, rec.Gen, u); err != nil {
				return n, err
			}
		}
		if err := o.putStripe(ino, &rec); err != nil {
			return n, err
		}
		u.add(rec.Pool, rec.raw())
		grow += rec.raw()
		n.Stored += uint64(rec.Len) - uint64(olds[i].Len) // olds[i].Len is 0 if none
	}
	if err := o.checkLimit(n.Layout.Pool, grow); err != nil {
		return n, err
	}
	if err := u.flush(o); err != nil {
		return n, err
	}
	n.clean &^= cleanNoStripes
	return n, nil
}

func checkCommits(commits []StripeCommit) error {
	seen := make(map[uint64]bool, len(commits))
	if len(commits) == 0 {
		return fmt.Errorf("no stripes: %w", ErrInvalid)
	}
	for _, c := range commits {
		switch {
		case seen[c.Rec.Stripe]:
			return fmt.Errorf("stripe %d twice: %w", c.Rec.Stripe, ErrInvalid)
		case c.Rec.Gen <= c.OldGen:
			return fmt.Errorf("stripe %d gen %d after %d: %w", c.Rec.Stripe, c.Rec.Gen, c.OldGen, ErrInvalid)
		case IsLogStripe(c.Rec.Stripe):
			return fmt.Errorf("stripe %d is a log stripe (CommitDeltas): %w", c.Rec.Stripe, ErrInvalid)
		}
		seen[c.Rec.Stripe] = true
	}
	return nil
}

// file returns inode ino, which must be a regular file.
func (o *op) file(ino Ino) (inode, error) {
	n, err := o.inode(ino)
	if err != nil {
		return n, err
	}
	switch n.Type {
	case TypeFile:
		return n, nil
	case TypeDir:
		return n, fmt.Errorf("inode %d: %w", ino, ErrIsDir)
	default:
		return n, fmt.Errorf("inode %d is a %v: %w", ino, n.Type, ErrInvalid)
	}
}

// countStored makes n.Stored exact if n predates the count: one scan of
// its stripes, once per file, in the transaction about to change them.
func (o *op) countStored(n *inode) error {
	if n.clean&(storedCounted|cleanNoStripes) != 0 {
		n.clean |= storedCounted
		return nil
	}
	recs, err := o.scanStripes(n.Ino, 0, LogStripeBase-1)
	if err != nil {
		return err
	}
	n.Stored = 0
	for _, r := range recs {
		if !IsLogStripe(r.Stripe) {
			n.Stored += uint64(r.Len)
		}
	}
	n.clean |= storedCounted
	return nil
}

// dropStripe removes stripe record r of ino (a committed generation): its
// PG index entry and its usage; its fragments go to the GC queue. The
// caller deletes or replaces its key.
func (o *op) dropStripe(ino Ino, r *storedStripe, u *usageDelta) error {
	if err := o.tx.Delete(pgKey(r.Pool, r.PG, StripeRef{ino, r.Stripe, r.Gen})); err != nil {
		return err
	}
	u.add(r.Pool, -r.raw())
	return o.enqueueGC(GCItem{Ino: ino, Stripe: r.Stripe, Gen: r.Gen, Drives: r.Drives, ShardSize: r.ShardSize})
}

// dropStripes removes every stripe of file n numbered from first on.
func (o *op) dropStripes(n *inode, first uint64) error {
	return o.dropRange(n, first, LogStripeBase-1)
}

// dropRange removes the stripes of file n numbered first to last (<
// LogStripeBase) with their delta extents, and takes their bytes off
// n.Stored (the caller stores n). Log stripes go when no extent is left
// in them (dropDeltas); dropping every stripe (first 0) also drops any
// log stripe left without extents.
func (o *op) dropRange(n *inode, first, last uint64) error {
	if err := o.countStored(n); err != nil {
		return err
	}
	last = min(last, LogStripeBase-1)
	u := o.usage(n.Ino, first)
	gone, err := o.dropDeltas(n.Ino, first, last, u)
	if err != nil {
		return err
	}
	recs, err := o.scanStripes(n.Ino, first, last)
	if err != nil {
		return err
	}
	if first == 0 && last == LogStripeBase-1 {
		logs, err := o.scanStripes(n.Ino, LogStripeBase, math.MaxUint64)
		if err != nil {
			return err
		}
		for _, l := range logs {
			if !gone[l.Stripe] {
				if err := o.tx.Delete(logLiveKey(n.Ino, l.Stripe)); err != nil {
					return err
				}
				l.Len = 0 // not in Stored
				recs = append(recs, l)
			}
		}
	}
	for i := range recs {
		if err := o.dropStripe(n.Ino, &recs[i], u); err != nil {
			return err
		}
		if err := o.tx.Delete(stripeKey(n.Ino, recs[i].Stripe)); err != nil {
			return err
		}
		n.Stored -= min(n.Stored, uint64(recs[i].Len))
	}
	return u.flush(o)
}

// DropStripes removes the committed stripes of file ino numbered first to
// last (a hole punched in it): their fragments go to the GC queue and the
// pool usage and Stored follow; the size stays. ctime and mtime become
// now. It returns the new attributes. Errors: ErrNotFound, ErrIsDir,
// ErrInvalid (first > last, or not a regular file).
func (s *Store) DropStripes(ctx context.Context, ino Ino, first, last uint64) (Attr, error) {
	if first > last {
		return Attr{}, fmt.Errorf("drop stripes %d..%d of %d: %w", first, last, ino, ErrInvalid)
	}
	var a Attr
	err := s.update(ctx, func(o *op) error {
		n, err := o.file(ino)
		if err != nil {
			return err
		}
		if n.clean&cleanNoStripes == 0 {
			if err := o.dropRange(&n, first, last); err != nil {
				return err
			}
		}
		n.Mtime, n.Ctime = o.now, o.now
		a = n.Attr
		return o.putInode(&n)
	})
	if err != nil {
		return Attr{}, fmt.Errorf("drop stripes %d..%d of %d: %w", first, last, ino, err)
	}
	return a, nil
}

// ReplaceStripeDrives records new fragment locations for generation gen of
// a stripe (rebuild and rebalance): fragment i moves to drives[i]. It is a
// compare-and-set on gen: ErrConflict if the stripe is gone or has another
// generation (the rebuilt fragments are then garbage). Fragments left on
// drives that were replaced go to the GC queue, with NoDrive at the indexes
// that did not move. Errors: ErrInvalid (drive count differs), ErrNotFound.
func (s *Store) ReplaceStripeDrives(ctx context.Context, ino Ino, stripe, gen uint64, drives []uint32) error {
	err := s.update(ctx, func(o *op) error {
		r, ok, err := o.stripe(ino, stripe)
		if err != nil {
			return err
		}
		if !ok || r.Gen != gen {
			return newConflict(ino, []uint64{stripe})
		}
		if len(drives) != len(r.Drives) {
			return fmt.Errorf("%d drives for %d fragments: %w", len(drives), len(r.Drives), ErrInvalid)
		}
		moved := make([]uint32, len(drives))
		any := false
		for i := range drives {
			moved[i] = NoDrive
			if drives[i] != r.Drives[i] {
				moved[i], any = r.Drives[i], true
			}
		}
		if !any {
			return nil
		}
		r.Drives = append([]uint32(nil), drives...)
		if err := o.tx.Put(stripeKey(ino, stripe), encodeStripe(ino, &r)); err != nil {
			return err
		}
		return o.enqueueGC(GCItem{Ino: ino, Stripe: stripe, Gen: gen, Drives: moved, ShardSize: r.ShardSize})
	})
	if err != nil {
		return fmt.Errorf("replace drives of stripe %d gen %d of %d: %w", stripe, gen, ino, err)
	}
	return nil
}

// Committed reports whether stripe of ino is committed with exactly
// generation gen. Fragment GC uses it to tell orphan fragments (a writer
// that died before committing) from live ones.
func (s *Store) Committed(ctx context.Context, ino Ino, stripe, gen uint64) (bool, error) {
	var yes bool
	err := s.view(ctx, func(o *op) error {
		r, ok, err := o.stripe(ino, stripe)
		yes = ok && r.Gen == gen
		return err
	})
	if err != nil {
		return false, fmt.Errorf("committed %d/%d/%d: %w", ino, stripe, gen, err)
	}
	return yes, nil
}

// ListPG returns up to limit (<= 0: all) committed stripe generations
// placed in placement group pg of pool, ordered by (ino, stripe, gen),
// starting after the reference after (zero: from the start).
func (s *Store) ListPG(ctx context.Context, pool, pg uint32, after StripeRef, limit int) ([]StripeRef, error) {
	var out []StripeRef
	err := s.view(ctx, func(o *op) error {
		out = out[:0]
		p := pgPrefix(pool, pg)
		start := p
		if after != (StripeRef{}) {
			start = append(pgKey(pool, pg, after), 0)
		}
		return o.tx.Scan(start, prefixEnd(p), limit, func(k, _ []byte) bool {
			if len(k) == 33 {
				out = append(out, refFromPGKey(k))
			}
			return true
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list pool %d pg %d: %w", pool, pg, err)
	}
	return out, nil
}

// touched sets n's ctime to now and its mtime to mtime (0: now), as a
// commit of its data does, and returns its attributes.
func (o *op) touched(n *inode, mtime int64) Attr {
	n.Mtime, n.Ctime = o.now, o.now
	if mtime != 0 {
		n.Mtime = mtime
	}
	return n.Attr
}
