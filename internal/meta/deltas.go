package meta

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
)

// Delta extents: partial-stripe updates without read-modify-write.
//
// A write that covers only part of a committed stripe need not rewrite the
// stripe: its bytes are written, packed with other such bytes of the same
// file, into a log stripe, and a delta extent records where they go. A log
// stripe is an ordinary stripe record (fragments, PG index entry, pool
// usage, GC, rebuild, scrub) under a stripe number from LogStripeBase on;
// the extents are records of their own:
//
//	D <ino:8> <stripe:8> <seq:8>  extent: offset and length in the stripe,
//	                              log stripe and offset in it, base gen;
//	                              or a group of extents of one log stripe
//	                              and base gen (delta_codec.go)
//	L <ino:8> <log:8>             bytes the extents in log stripe log
//	                              reference (8 bytes big-endian)
//
// Invariants:
//   - An extent of stripe s has BaseGen equal to s's committed generation:
//     every transaction that replaces or drops a generation of s deletes
//     s's extents in the same transaction (CommitStripes, truncate,
//     DropStripes, unlink), or, for a fold (FoldStripes), those it folded,
//     setting the BaseGen of the later ones to the new generation.
//   - An extent lies within its stripe's Len and within its log stripe's
//     Len, and within the file's size when committed (a truncation
//     below it rewrites or drops the stripe); Seq grows with commit order within a stripe (the extents of
//     a group share it and apply in their order).
//   - Every log stripe has an L record equal to the sum of the lengths of
//     the extents that reference it, and that sum is > 0: the transaction
//     that takes it to 0 drops the log stripe (its fragments go to the GC
//     queue like any old generation).
//   - Log stripes count in the pool usage but not in the file's Stored
//     (st_blocks counts the stripes' user bytes once).

// LogStripeBase is the first stripe number of delta log stripes. Ordinary
// stripes are numbered below it (a file would need 2^63 stripes to reach
// it).
const LogStripeBase uint64 = 1 << 63

// IsLogStripe reports whether stripe number s is a delta log stripe.
func IsLogStripe(s uint64) bool { return s >= LogStripeBase }

// Delta is one delta extent: Len bytes at Off of Stripe, stored at LogOff
// of log stripe Log, applied over generation BaseGen.
type Delta struct {
	Stripe  uint64
	Seq     uint64 // assigned by CommitDeltas, ascending per stripe
	Off     uint32
	Len     uint32
	Log     uint64
	LogOff  uint32
	BaseGen uint64
	// LogRec is the committed record of log stripe Log, filled by
	// Store.Stripes (so that a reader needs no second call).
	LogRec StripeRec
}

// LogCommit is one log stripe of a CommitDeltas call: its record (Stripe
// from LogStripeBase on, not committed before) and the extents whose
// bytes it holds.
type LogCommit struct {
	Rec    StripeRec
	Deltas []Delta
}

// CommitDeltas makes delta extents visible, all or nothing: it commits
// each log stripe (as CommitStripes would a new stripe: PG index, pool
// usage) and its extents, each of which must lie within its stripe's Len
// and its log stripe's Len. Every target stripe's committed generation
// must equal the extents' BaseGen, every extent must lie within the file's
// size (a stripe preallocated beyond it has a Len there) and every log
// stripe must be new, else it returns a *ConflictError and changes
// nothing. The extents get
// sequence numbers after those their stripes have, in the order given;
// mtime becomes mtime (0: now) and ctime now; size and Stored stay.
// Errors: ErrPoolFull, ErrNotFound, ErrIsDir, ErrInvalid.
func (s *Store) CommitDeltas(ctx context.Context, ino Ino, logs []LogCommit, mtime int64) (Attr, error) {
	if err := checkLogs(logs); err != nil {
		return Attr{}, fmt.Errorf("commit deltas of %d: %w", ino, err)
	}
	var a Attr
	err := s.update(ctx, func(o *op) error {
		n, err := o.file(ino)
		if err != nil {
			return err
		}
		if err := o.countStored(&n); err != nil {
			return err
		}
		bases := map[uint64]storedStripe{}
		var conflicts []uint64
		for _, l := range logs {
			if err := l.Rec.fits(n.Layout); err != nil {
				return err
			}
			if _, ok, err := o.stripe(ino, l.Rec.Stripe); err != nil {
				return err
			} else if ok {
				conflicts = append(conflicts, l.Rec.Stripe)
			}
			for _, d := range l.Deltas {
				b, seen := bases[d.Stripe]
				if !seen {
					if b, _, err = o.stripe(ino, d.Stripe); err != nil {
						return err
					}
					bases[d.Stripe] = b // Gen 0 if absent
				}
				if b.Gen != d.BaseGen || b.Gen == 0 {
					if !seen {
						conflicts = append(conflicts, d.Stripe)
					}
					continue
				}
				if uint64(d.Off)+uint64(d.Len) > uint64(b.Len) {
					return fmt.Errorf("delta %d+%d beyond stripe %d's %d bytes: %w", d.Off, d.Len, d.Stripe, b.Len, ErrInvalid)
				}
				// Extents change no size: bytes past the end of the
				// file (in a stripe preallocated beyond it) would be
				// lost at the next open, or show at a later extension.
				// The writer merges them instead (a conflict: the size
				// it knew may have shrunk since).
				if sb := n.Layout.StripeBytes(); d.Stripe > n.Size/sb || d.Stripe*sb+uint64(d.Off)+uint64(d.Len) > n.Size {
					if !slices.Contains(conflicts, d.Stripe) {
						conflicts = append(conflicts, d.Stripe)
					}
				}
			}
		}
		if conflicts != nil {
			return newConflict(ino, conflicts)
		}
		read, err := o.deltaSumsOf(ino, slices.Collect(maps.Keys(bases)))
		if err != nil {
			return err
		}
		sums := make(map[uint64]*DeltaSummary, len(bases))
		for st := range bases {
			sum := read[st]
			sums[st] = &sum
		}
		u := o.usage(ino, logs[0].Rec.Stripe)
		var grow int64
		for _, l := range logs {
			rec := storedStripe{StripeRec: l.Rec, Pool: n.Layout.Pool}
			rec.Drives = append([]uint32(nil), l.Rec.Drives...)
			rec.Deltas = nil
			if err := o.putStripe(ino, &rec); err != nil {
				return err
			}
			u.add(rec.Pool, rec.raw())
			grow += rec.raw()
			var live uint64
			ds := slices.Clone(l.Deltas)
			run := 0 // extents in the record being made
			for i := range ds {
				d := &ds[i]
				sum := sums[d.Stripe]
				// A run of one stripe's extents is one record (a
				// group, delta_codec.go) of one sequence number.
				if i > 0 && ds[i-1].Stripe == d.Stripe && run < maxDeltaGroup {
					run++
				} else {
					run = 1
					sum.LastSeq++
				}
				d.Seq, d.Log = sum.LastSeq, l.Rec.Stripe
				sum.add(*d, l.Rec.Len)
				live += uint64(d.Len)
			}
			if err := o.putDeltas(ino, ds); err != nil {
				return err
			}
			if err := o.tx.Put(logLiveKey(ino, l.Rec.Stripe), encodeU64(live)); err != nil {
				return err
			}
		}
		for st, sum := range sums {
			if err := o.putDeltaSum(ino, st, sum); err != nil {
				return err
			}
		}
		if err := o.checkLimit(n.Layout.Pool, grow); err != nil {
			return err
		}
		if err := u.flush(o); err != nil {
			return err
		}
		a = o.touched(&n, mtime)
		return o.putInode(&n)
	})
	if err != nil {
		return Attr{}, fmt.Errorf("commit %d log stripes of %d: %w", len(logs), ino, err)
	}
	return a, nil
}

func checkLogs(logs []LogCommit) error {
	if len(logs) == 0 {
		return fmt.Errorf("no log stripes: %w", ErrInvalid)
	}
	seen := map[uint64]bool{}
	for _, l := range logs {
		r := l.Rec
		switch {
		case !IsLogStripe(r.Stripe) || r.Gen == 0 || seen[r.Stripe]:
			return fmt.Errorf("log stripe %#x gen %d: %w", r.Stripe, r.Gen, ErrInvalid)
		case len(l.Deltas) == 0:
			return fmt.Errorf("log stripe %#x without extents: %w", r.Stripe, ErrInvalid)
		}
		seen[r.Stripe] = true
		for _, d := range l.Deltas {
			if IsLogStripe(d.Stripe) || d.Len == 0 || uint64(d.LogOff)+uint64(d.Len) > uint64(r.Len) {
				return fmt.Errorf("delta of stripe %d (%d bytes at %d of log %d bytes): %w",
					d.Stripe, d.Len, d.LogOff, r.Len, ErrInvalid)
			}
		}
	}
	return nil
}

// putStripe writes stripe record r of ino and its PG index entry.
func (o *op) putStripe(ino Ino, r *storedStripe) error {
	if err := o.tx.Put(stripeKey(ino, r.Stripe), encodeStripe(ino, r)); err != nil {
		return err
	}
	return o.tx.Put(pgKey(r.Pool, r.PG, StripeRef{ino, r.Stripe, r.Gen}), []byte{})
}

// deltas returns the extents of stripes first to last of ino (< LogStripeBase),
// by stripe and sequence number.
func (o *op) deltas(ino Ino, first, last uint64) ([]Delta, error) {
	var out []Delta
	var derr error
	end := deltaStripeKey(ino, last+1)
	if last+1 >= LogStripeBase {
		end = prefixEnd(deltaStripeKey(ino, LogStripeBase-1))
	}
	err := o.tx.Scan(deltaStripeKey(ino, first), end, 0, func(k, v []byte) bool {
		if len(k) != 25 {
			derr = fmt.Errorf("delta key of %d bytes in inode %d: %w", len(k), ino, ErrCorrupt)
			return false
		}
		var err error
		out, err = decodeDeltas(out, ino, binary.BigEndian.Uint64(k[9:]), binary.BigEndian.Uint64(k[17:]), v)
		if err != nil {
			derr = err
			return false
		}
		return true
	})
	if err == nil {
		err = derr
	}
	return out, err
}

// foldDeltas deletes the extents of stripe st of ino with sequence
// numbers up to upTo (FoldAll: all), as dropDeltas does, and sets the
// BaseGen of those after them to gen, the generation that replaced the
// one they were committed over.
func (o *op) foldDeltas(ino Ino, st, upTo, gen uint64, u *usageDelta) error {
	ds, err := o.deltas(ino, st, st)
	if err != nil || len(ds) == 0 {
		return err
	}
	old, err := o.deltaSum(ino, st)
	if err != nil {
		return err
	}
	cut := len(ds)
	for i, d := range ds {
		if d.Seq > upTo {
			cut = i
			break
		}
	}
	kept := slices.Clone(ds[cut:])
	for i := range kept {
		kept[i].BaseGen = gen
	}
	if err := o.putDeltas(ino, kept); err != nil {
		return err
	}
	if _, err = o.dropExtents(ino, ds[:cut], u); err != nil {
		return err
	}
	return o.resum(ino, st, ds[cut:], old)
}

// dropDeltas deletes the extents of stripes first to last of ino (<
// LogStripeBase) and takes their bytes off their log stripes' counts; a
// log stripe no extent references any more is dropped (its fragments go
// to the GC queue). It returns the log stripes dropped.
func (o *op) dropDeltas(ino Ino, first, last uint64, u *usageDelta) (map[uint64]bool, error) {
	ds, err := o.deltas(ino, first, last)
	if err != nil || len(ds) == 0 {
		return nil, err
	}
	return o.dropExtents(ino, ds, u)
}

// dropExtents is dropDeltas of the extents ds. It deletes the summaries
// of their stripes (a caller that keeps some of a stripe's extents
// stores their summary after it).
func (o *op) dropExtents(ino Ino, ds []Delta, u *usageDelta) (map[uint64]bool, error) {
	if len(ds) == 0 {
		return nil, nil
	}
	less := map[uint64]uint64{}
	for i, d := range ds {
		if i > 0 && d.Stripe == ds[i-1].Stripe && d.Seq == ds[i-1].Seq {
			less[d.Log] += uint64(d.Len) // of the group deleted with the one before
			continue
		}
		if err := o.tx.Delete(deltaKey(ino, d.Stripe, d.Seq)); err != nil {
			return nil, err
		}
		if i == 0 || d.Stripe != ds[i-1].Stripe {
			if err := o.tx.Delete(deltaSumKey(ino, d.Stripe)); err != nil {
				return nil, err
			}
		}
		less[d.Log] += uint64(d.Len)
	}
	dropped := map[uint64]bool{}
	for _, log := range slices.Sorted(maps.Keys(less)) {
		v, ok, err := o.get(logLiveKey(ino, log))
		if err != nil {
			return nil, err
		}
		var live uint64
		if ok {
			if live, err = decodeU64(v); err != nil {
				return nil, fmt.Errorf("live count of log stripe %#x of %d: %w", log, ino, err)
			}
		}
		if live > less[log] {
			if err := o.tx.Put(logLiveKey(ino, log), encodeU64(live-less[log])); err != nil {
				return nil, err
			}
			continue
		}
		if err := o.tx.Delete(logLiveKey(ino, log)); err != nil {
			return nil, err
		}
		r, ok, err := o.stripe(ino, log)
		if err != nil {
			return nil, err
		}
		if ok {
			if err := o.dropStripe(ino, &r, u); err != nil {
				return nil, err
			}
			if err := o.tx.Delete(stripeKey(ino, log)); err != nil {
				return nil, err
			}
		}
		dropped[log] = true
	}
	return dropped, nil
}

// attachDeltas fills the Deltas of the records recs (ordinary stripes
// first to last of ino, ascending) with their extents and each extent's
// log stripe record. An extent without its stripe's current generation or
// without its log stripe is ErrCorrupt.
func (o *op) attachDeltas(ino Ino, recs []storedStripe, first, last uint64) error {
	if first >= LogStripeBase {
		return nil
	}
	ds, err := o.deltas(ino, first, min(last, LogStripeBase-1))
	if err != nil || len(ds) == 0 {
		return err
	}
	logs := map[uint64]StripeRec{}
	i := 0
	for j := range ds {
		d := &ds[j]
		for i < len(recs) && recs[i].Stripe < d.Stripe {
			i++
		}
		if i == len(recs) || recs[i].Stripe != d.Stripe || recs[i].Gen != d.BaseGen {
			return fmt.Errorf("delta %d of stripe %d of %d over gen %d: stripe not at that generation: %w",
				d.Seq, d.Stripe, ino, d.BaseGen, ErrCorrupt)
		}
		lr, ok := logs[d.Log]
		if !ok {
			r, found, err := o.stripe(ino, d.Log)
			if err != nil {
				return err
			}
			if !found {
				return fmt.Errorf("delta %d of stripe %d of %d: log stripe %#x missing: %w", d.Seq, d.Stripe, ino, d.Log, ErrCorrupt)
			}
			lr = r.StripeRec
			logs[d.Log] = lr
		}
		d.LogRec = lr
		// ds is sorted by stripe: each record's extents are a run of it.
		n := len(recs[i].Deltas)
		recs[i].Deltas = ds[j-n : j+1 : j+1]
	}
	return nil
}

// checkDeltas checks the delta invariants over the whole store: every
// extent decodes, applies over its stripe's committed generation and
// points into a log stripe that exists, and every live count is the sum
// of the lengths of the extents in its log stripe.
func (o *op) checkDeltas() ([]NamespaceProblem, error) {
	var probs []NamespaceProblem
	type logRef struct {
		ino Ino
		log uint64
	}
	sums := map[logRef]uint64{}
	type stripeRef struct {
		ino    Ino
		stripe uint64
	}
	gens := map[stripeRef]uint64{}
	bad := func(ino Ino, f string, a ...any) {
		probs = append(probs, NamespaceProblem{Kind: ProblemDelta, Ino: ino, Detail: fmt.Sprintf(f, a...)})
	}
	var ds []Delta
	var inos []Ino
	p := []byte{pDelta}
	err := o.tx.Scan(p, prefixEnd(p), 0, func(k, v []byte) bool {
		if len(k) != 25 {
			bad(0, "delta key of %d bytes", len(k))
			return true
		}
		ino := Ino(binary.BigEndian.Uint64(k[1:]))
		n := len(ds)
		var err error
		ds, err = decodeDeltas(ds, ino, binary.BigEndian.Uint64(k[9:]), binary.BigEndian.Uint64(k[17:]), v)
		if err != nil {
			bad(ino, "%v", err)
			return true
		}
		for range ds[n:] {
			inos = append(inos, ino)
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	for i, d := range ds {
		ino := inos[i]
		sums[logRef{ino, d.Log}] += uint64(d.Len)
		sr := stripeRef{ino, d.Stripe}
		g, seen := gens[sr]
		if !seen {
			r, ok, err := o.stripe(ino, d.Stripe)
			if err != nil && !errors.Is(err, ErrCorrupt) {
				return nil, err
			}
			if ok {
				g = r.Gen
			}
			gens[sr] = g
		}
		if g != d.BaseGen {
			bad(ino, "delta %d of stripe %d applies over generation %d, the stripe has %d", d.Seq, d.Stripe, d.BaseGen, g)
		}
	}
	counts := map[logRef]uint64{}
	p = []byte{pLogLive}
	err = o.tx.Scan(p, prefixEnd(p), 0, func(k, v []byte) bool {
		if len(k) != 17 {
			bad(0, "live count key of %d bytes", len(k))
			return true
		}
		lr := logRef{Ino(binary.BigEndian.Uint64(k[1:])), binary.BigEndian.Uint64(k[9:])}
		n, err := decodeU64(v)
		if err != nil {
			bad(lr.ino, "live count of log stripe %#x: %v", lr.log, err)
			return true
		}
		counts[lr] = n
		return true
	})
	if err != nil {
		return nil, err
	}
	for _, lr := range slices.SortedFunc(maps.Keys(sums), func(a, b logRef) int {
		return cmp.Or(cmp.Compare(a.ino, b.ino), cmp.Compare(a.log, b.log))
	}) {
		if _, ok, err := o.stripe(lr.ino, lr.log); err != nil && !errors.Is(err, ErrCorrupt) {
			return nil, err
		} else if !ok {
			bad(lr.ino, "extents in log stripe %#x, which has no record", lr.log)
		}
		if counts[lr] != sums[lr] {
			bad(lr.ino, "log stripe %#x: live count %d, its extents hold %d bytes", lr.log, counts[lr], sums[lr])
		}
	}
	for lr, n := range counts {
		if _, ok := sums[lr]; !ok {
			bad(lr.ino, "log stripe %#x: live count %d and no extents", lr.log, n)
		}
	}
	sumProbs, err := o.checkDeltaSums(ds, inos)
	return append(probs, sumProbs...), err
}

// checkDeltaSums checks the summaries against the extents ds (of the
// inodes inos): every summary decodes and equals its stripe's extents
// (count, bytes, last sequence number, log stripes and their lengths),
// and no summary is left of a stripe without extents. A stripe with
// extents and no summary (committed before summaries were kept) is
// fine.
func (o *op) checkDeltaSums(ds []Delta, inos []Ino) ([]NamespaceProblem, error) {
	var probs []NamespaceProblem
	type stripeRef struct {
		ino    Ino
		stripe uint64
	}
	want := map[stripeRef]*DeltaSummary{}
	unknown := map[stripeRef]bool{}
	lens := map[Ino]map[uint64]uint32{}
	for i, d := range ds {
		sr := stripeRef{inos[i], d.Stripe}
		if want[sr] == nil {
			want[sr] = &DeltaSummary{}
		}
		if lens[sr.ino] == nil {
			lens[sr.ino] = map[uint64]uint32{}
		}
		l, err := o.logLen(sr.ino, d.Log, lens[sr.ino])
		if errors.Is(err, ErrCorrupt) {
			unknown[sr] = true // a missing log stripe: checkDeltas reports it
		} else if err != nil {
			return nil, err
		}
		want[sr].add(d, l)
	}
	p := []byte{pDeltaSum}
	err := o.tx.Scan(p, prefixEnd(p), 0, func(k, v []byte) bool {
		if len(k) != 17 {
			probs = append(probs, NamespaceProblem{Kind: ProblemDelta, Detail: fmt.Sprintf("delta summary key of %d bytes", len(k))})
			return true
		}
		sr := stripeRef{Ino(binary.BigEndian.Uint64(k[1:])), binary.BigEndian.Uint64(k[9:])}
		bad := func(f string, a ...any) {
			probs = append(probs, NamespaceProblem{Kind: ProblemDelta, Ino: sr.ino, Detail: fmt.Sprintf(f, a...)})
		}
		got, err := decodeDeltaSum(sr.ino, sr.stripe, v)
		switch w := want[sr]; {
		case err != nil:
			bad("%v", err)
		case w == nil:
			bad("summary of stripe %d, which has no extents", sr.stripe)
		case !unknown[sr] && !reflect.DeepEqual(got, *w):
			bad("summary of stripe %d is %+v, its extents make %+v", sr.stripe, got, *w)
		}
		return true
	})
	return probs, err
}
