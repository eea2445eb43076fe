package meta

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"
)

// Delta summaries: what a writer needs to know of a stripe's extents
// without reading them.
//
//	E <ino:8> <stripe:8>  summary of the extents of the stripe: their
//	                      count, bytes and last sequence number, and the
//	                      log stripes they are in with each one's length
//
// A write-back of random small writes touches most stripes of a file, and
// to decide on folds it needs only these figures of each; reading every
// extent of every stripe (up to 256 each) made the records' read cost
// grow with the whole log at every write-back, and so did finding each
// stripe's last sequence number in CommitDeltas.
//
// Invariant: a stripe that has extents has an E record equal to their
// summary, kept in the transaction that changes them (CommitDeltas,
// FoldStripes, and every drop of extents), or, for extents committed
// before summaries were kept, none: then the summary is made from the
// extents when it is needed, and stored at their next change. A stripe
// without extents has no E record. CheckNamespace checks both.

// DeltaSummary sums up the delta extents of one stripe.
type DeltaSummary struct {
	Extents int    // how many
	Bytes   int64  // the sum of their lengths
	LastSeq uint64 // the sequence number of the last one
	// Logs are the log stripes they are in, ascending, with the length
	// of each (its StripeRec.Len).
	Logs []LogLen `json:",omitempty"`
}

// LogLen is a log stripe and its length.
type LogLen struct {
	Log uint64
	Len uint32
}

// DeltaSum returns the summary of r's extents: r.Sum if StripeHeads
// filled it, else summed from r.Deltas (empty if r has no extents).
func (r StripeRec) DeltaSum() DeltaSummary {
	if r.Sum != nil {
		return *r.Sum
	}
	var s DeltaSummary
	for _, d := range r.Deltas {
		s.add(d, d.LogRec.Len)
	}
	return s
}

// add counts extent d, in a log stripe of logLen bytes.
func (s *DeltaSummary) add(d Delta, logLen uint32) {
	s.Extents++
	s.Bytes += int64(d.Len)
	s.LastSeq = max(s.LastSeq, d.Seq)
	i, found := slices.BinarySearchFunc(s.Logs, d.Log, func(l LogLen, log uint64) int { return cmp.Compare(l.Log, log) })
	if !found {
		s.Logs = slices.Insert(s.Logs, i, LogLen{d.Log, logLen})
	}
}

// StripeHeads returns the committed records of stripes first..last of
// ino, as Stripes does, but with the summary of each one's extents (Sum;
// nil if it has none: log stripes never have any) in place of the
// extents (Deltas stays nil): a record without reading its extents.
// Errors: as Stripes.
func (s *Store) StripeHeads(ctx context.Context, ino Ino, first, last uint64) ([]StripeRec, error) {
	var out []StripeRec
	err := s.view(ctx, func(o *op) error {
		out = out[:0]
		if _, err := o.inode(ino); err != nil {
			return err
		}
		recs, err := o.scanStripes(ino, first, last)
		if err != nil {
			return err
		}
		var sums map[uint64]DeltaSummary
		if first < LogStripeBase {
			if sums, err = o.deltaSums(ino, first, min(last, LogStripeBase-1)); err != nil {
				return err
			}
		}
		for _, r := range recs {
			if sum, ok := sums[r.Stripe]; ok {
				r.Sum = &sum
			}
			out = append(out, r.StripeRec)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("stripe heads %d..%d of %d: %w", first, last, ino, err)
	}
	return out, nil
}

// deltaSums returns the summaries of the extents of stripes first..last
// of ino (< LogStripeBase) that have any: from their E records, and for
// each run of stripes without one, from the extents of the run, if any
// (extents committed before summaries were kept).
func (o *op) deltaSums(ino Ino, first, last uint64) (map[uint64]DeltaSummary, error) {
	sums := map[uint64]DeltaSummary{}
	next := first // the first stripe not yet covered by an E record
	var gaps [][2]uint64
	err := o.scanSums(ino, first, last, nil, func(st uint64, sum DeltaSummary) {
		sums[st] = sum
		if st > next {
			gaps = append(gaps, [2]uint64{next, st - 1})
		}
		next = st + 1
	})
	if err != nil {
		return nil, err
	}
	if next <= last {
		gaps = append(gaps, [2]uint64{next, last})
	}
	lens := map[uint64]uint32{}
	for _, g := range gaps {
		ds, err := o.deltas(ino, g[0], g[1])
		if err != nil {
			return nil, err
		}
		if err := o.addExtents(ino, ds, lens, sums); err != nil {
			return nil, err
		}
	}
	return sums, nil
}

// scanSums decodes the E records of stripes first..last of ino that want
// (nil: all) accepts, in order, and hands each to fn.
func (o *op) scanSums(ino Ino, first, last uint64, want func(st uint64) bool, fn func(st uint64, sum DeltaSummary)) error {
	var derr error
	err := o.tx.Scan(deltaSumKey(ino, first), deltaSumKey(ino, last+1), 0, func(k, v []byte) bool {
		if len(k) != 17 {
			derr = fmt.Errorf("delta summary key of %d bytes in inode %d: %w", len(k), ino, ErrCorrupt)
			return false
		}
		st := binary.BigEndian.Uint64(k[9:])
		if want != nil && !want(st) {
			return true
		}
		sum, err := decodeDeltaSum(ino, st, v)
		if err != nil {
			derr = err
			return false
		}
		fn(st, sum)
		return true
	})
	if err == nil {
		err = derr
	}
	return err
}

// addExtents adds the extents ds of ino to the summaries of their
// stripes in sums, with the log stripes' lengths through the cache lens.
func (o *op) addExtents(ino Ino, ds []Delta, lens map[uint64]uint32, sums map[uint64]DeltaSummary) error {
	for _, d := range ds {
		l, err := o.logLen(ino, d.Log, lens)
		if err != nil {
			return err
		}
		sum := sums[d.Stripe]
		sum.add(d, l)
		sums[d.Stripe] = sum
	}
	return nil
}

// sumRunGap is how far apart two stripes of a deltaSumsOf call may lie to
// be read in one scan of E records: what lies between costs at most that
// many records read for nothing.
const sumRunGap = 16

// deltaSumsOf returns the summaries of the extents of stripes sts of ino
// (< LogStripeBase; a stripe without extents has an empty one; sts is
// sorted in place). Stripes at most sumRunGap apart are read in one scan
// of their E records, where deltaSum would scan once a stripe: a
// write-back of random 4 KiB writes commits extents to most stripes of a
// file at once, and those scans were most of CommitDeltas' CPU. A stripe
// without an E record is summed from its extents, if any (committed
// before summaries were kept), as deltaSum does.
func (o *op) deltaSumsOf(ino Ino, sts []uint64) (map[uint64]DeltaSummary, error) {
	slices.Sort(sts)
	sums := make(map[uint64]DeltaSummary, len(sts))
	lens := map[uint64]uint32{}
	for i := 0; i < len(sts); {
		j := i + 1
		for j < len(sts) && sts[j]-sts[j-1] <= sumRunGap {
			j++
		}
		run := sts[i:j]
		want := func(st uint64) bool { _, ok := slices.BinarySearch(run, st); return ok }
		err := o.scanSums(ino, run[0], run[len(run)-1], want, func(st uint64, sum DeltaSummary) { sums[st] = sum })
		if err != nil {
			return nil, err
		}
		for _, st := range run { // runs are disjoint: a summary here is from the scan
			if _, ok := sums[st]; ok {
				continue
			}
			ds, err := o.deltas(ino, st, st)
			if err != nil {
				return nil, err
			}
			if err := o.addExtents(ino, ds, lens, sums); err != nil {
				return nil, err
			}
		}
		i = j
	}
	return sums, nil
}

// deltaSum is deltaSums of one stripe (an empty summary if it has no
// extents).
func (o *op) deltaSum(ino Ino, st uint64) (DeltaSummary, error) {
	sums, err := o.deltaSums(ino, st, st)
	return sums[st], err
}

// logLen returns the length of log stripe log of ino, through the cache
// lens. A log stripe without its record is ErrCorrupt.
func (o *op) logLen(ino Ino, log uint64, lens map[uint64]uint32) (uint32, error) {
	if l, ok := lens[log]; ok {
		return l, nil
	}
	r, found, err := o.stripe(ino, log)
	if err != nil {
		return 0, err
	}
	if !found {
		return 0, fmt.Errorf("log stripe %#x of %d missing: %w", log, ino, ErrCorrupt)
	}
	lens[log] = r.Len
	return r.Len, nil
}

// putDeltaSum stores the summary of stripe st's extents, or deletes it
// when the stripe has none.
func (o *op) putDeltaSum(ino Ino, st uint64, sum *DeltaSummary) error {
	if sum.Extents == 0 {
		return o.tx.Delete(deltaSumKey(ino, st))
	}
	return o.tx.Put(deltaSumKey(ino, st), encodeDeltaSum(ino, st, sum))
}

// resum stores the summary of the extents ds of stripe st (all it has
// now), taking the log stripes' lengths from old, the summary before the
// change, or from their records.
func (o *op) resum(ino Ino, st uint64, ds []Delta, old DeltaSummary) error {
	lens := map[uint64]uint32{}
	for _, l := range old.Logs {
		lens[l.Log] = l.Len
	}
	sums := map[uint64]DeltaSummary{}
	if err := o.addExtents(ino, ds, lens, sums); err != nil {
		return err
	}
	sum := sums[st]
	return o.putDeltaSum(ino, st, &sum)
}

func deltaSumKey(ino Ino, stripe uint64) []byte {
	return u64(u64(append(make([]byte, 0, 17), pDeltaSum), uint64(ino)), stripe)
}

// encodeDeltaSum encodes the summary of stripe st of file ino: format
// byte, count, bytes, last sequence number, the log stripes (count, then
// each one's number and length) as varints, and a CRC32C (big-endian) of
// the key (ino, stripe) and the bytes before it.
func encodeDeltaSum(ino Ino, st uint64, s *DeltaSummary) []byte {
	e := enc{b: make([]byte, 0, 24+15*len(s.Logs))}
	e.byte1(codecV1)
	e.uv(uint64(s.Extents))
	e.uv(uint64(s.Bytes))
	e.uv(s.LastSeq)
	e.uv(uint64(len(s.Logs)))
	for _, l := range s.Logs {
		e.uv(l.Log)
		e.uv(uint64(l.Len))
	}
	return binary.BigEndian.AppendUint32(e.b, deltaSumCRC(ino, st, e.b))
}

// deltaSumCRC is the checksum of a summary: CRC32C of its whole key
// (prefix byte included, so that no other record kind's checksum
// matches) and body.
func deltaSumCRC(ino Ino, st uint64, body []byte) uint32 {
	return crc32.Update(crc32.Checksum(deltaSumKey(ino, st), castagnoli), castagnoli, body)
}

// decodeDeltaSum decodes the summary stored for stripe st of ino.
func decodeDeltaSum(ino Ino, st uint64, b []byte) (DeltaSummary, error) {
	var s DeltaSummary
	what := func() string { return fmt.Sprintf("delta summary of stripe %d of inode %d", st, ino) }
	if len(b) < 5 {
		return s, fmt.Errorf("%s: short record: %w", what(), ErrCorrupt)
	}
	body := b[:len(b)-4]
	if binary.BigEndian.Uint32(b[len(body):]) != deltaSumCRC(ino, st, body) {
		return s, fmt.Errorf("%s: checksum mismatch (damaged record): %w", what(), ErrCorrupt)
	}
	d := dec{b: body}
	d.version()
	s.Extents = int(d.uv(1 << 32))
	s.Bytes = int64(d.uv(1 << 62))
	s.LastSeq = d.u64()
	n := d.uv(uint64(len(d.b)))
	if d.err == nil && (s.Extents == 0 || n == 0 || n > uint64(s.Extents) || IsLogStripe(st)) {
		d.fail("delta summary")
	}
	if d.err == nil {
		s.Logs = make([]LogLen, 0, n)
	}
	for i := uint64(0); i < n && d.err == nil; i++ {
		l := LogLen{Log: d.u64(), Len: d.u32()}
		if d.err == nil && (!IsLogStripe(l.Log) || len(s.Logs) > 0 && l.Log <= s.Logs[len(s.Logs)-1].Log) {
			d.fail("delta summary log stripes")
		}
		s.Logs = append(s.Logs, l)
	}
	return s, d.endLazy(what)
}
