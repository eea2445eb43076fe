package stripeio

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"poolfs/internal/chunkstore"
	"poolfs/internal/clustermap"
	"poolfs/internal/erasure"
	"poolfs/internal/placement"
)

// Drive is what stripe I/O asks of one drive. chunkstore.Drive (a local
// drive, a storage server's RPC drive, their wrappers) has it.
type Drive interface {
	ReadFragment(ctx context.Context, key erasure.FragmentKey, off, n int64, dst []byte) ([]byte, error)
	WriteFragment(ctx context.Context, key erasure.FragmentKey, frag []byte) error
	DeleteFragment(ctx context.Context, key erasure.FragmentKey) error
}

// Drives finds the drive with an ID. An error means the drive cannot be
// asked (not in the map, not reachable); it counts as a failed fetch or
// write of the fragment on it.
type Drives func(id placement.DriveID) (Drive, error)

// MapDrives reaches drives through a cluster map, as the client's,
// the management service's and the storage server's drive dialers do.
type MapDrives interface {
	Drive(m *clustermap.Map, id placement.DriveID) (chunkstore.Drive, error)
}

// OnMap returns the Drives that ds reaches through map m.
func OnMap(ds MapDrives, m *clustermap.Map) Drives {
	return func(id placement.DriveID) (Drive, error) {
		d, err := ds.Drive(m, id)
		if err != nil {
			return nil, err
		}
		return d, nil
	}
}

// Stripe is one generation of a stripe, as its commit record and scheme
// describe it: what every fragment header of it must say.
type Stripe struct {
	Ino, Stripe, Gen uint64
	K, M             int    // the stripe's own scheme (a small file's mirror is 1+M)
	Pool             uint32 // pool the stripe belongs to
	Len              uint32 // user bytes in the stripe
	ShardSize        int
}

// Key returns the key of fragment i.
func (st *Stripe) Key(i int) erasure.FragmentKey {
	return erasure.FragmentKey{Ino: st.Ino, Stripe: st.Stripe, Gen: st.Gen, Index: uint8(i)}
}

// Header returns the header fragment i is sealed with.
func (st *Stripe) Header(i int) erasure.Header {
	return erasure.Header{Key: st.Key(i), K: st.K, M: st.M, Pool: st.Pool, StripeLen: st.Len, ShardSize: uint32(st.ShardSize)}
}

// FragmentSize is the size of each of the stripe's fragments.
func (st *Stripe) FragmentSize() int { return erasure.FragmentSize(st.ShardSize) }

// ReadFragment reads fragment i of st from drive id (d) into buf (or a new
// buffer if buf is too small), checks its header against st and its
// checksums, and returns the shard, which lies in the returned buffer's
// memory. Errors name the fragment and the drive and wrap the drive's
// error (chunkstore.ErrNotFound for an absent fragment), or
// erasure.ErrCorrupt (header) or erasure.ErrChecksum (data) for bytes
// that fail the checks.
func ReadFragment(ctx context.Context, d Drive, id placement.DriveID, st *Stripe, i int, buf []byte) ([]byte, error) {
	key := st.Key(i)
	got, err := d.ReadFragment(ctx, key, 0, -1, buf[:cap(buf)])
	if err != nil {
		return nil, fmt.Errorf("read %v from %v: %w", key, id, err)
	}
	h, data, err := erasure.DecodeFragment(got)
	if err != nil {
		return nil, fmt.Errorf("fragment %v on %v: %w", key, id, err)
	}
	if h.Key != key || int(h.ShardSize) != st.ShardSize || h.StripeLen != st.Len {
		return nil, fmt.Errorf("%w: fragment on %v is %v (shard %d, len %d), want %v (shard %d, len %d)",
			erasure.ErrCorrupt, id, h.Key, h.ShardSize, h.StripeLen, key, st.ShardSize, st.Len)
	}
	return data, nil
}

// NewFragment returns a new aligned fragment buffer of st holding shard
// where WriteFragments, which seals it, wants it.
func NewFragment(st *Stripe, shard []byte) []byte {
	frag := erasure.AlignedBuffer(st.FragmentSize())
	copy(erasure.FragmentShard(frag, st.ShardSize), shard)
	return frag
}

// Loc is fragment Index of a stripe on drive Drive.
type Loc struct {
	Index int
	Drive placement.DriveID
}

// WriteFragments writes frags[j] as fragment targets[j].Index of st to
// targets[j].Drive, all in parallel, and returns one error per target (nil
// for those written). Each frags[j] must hold the shard where
// erasure.FragmentShard puts it and FragmentSize bytes at least: it is
// sealed (header and checksums) in place before it is written. The
// fragments of a mirror (st.K == 1) must hold the same shard, as the
// encoding of one data shard makes them: their checksums are computed
// once (erasure.SealCopy).
//
// Fragments of at most inlineWrite bytes bound for drives served in
// process (chunkstore.InProcess) are written in the calling goroutine,
// one after another, while the others go out in parallel: a small
// file's close then waits for no goroutine. To learn whether a drive is
// served in process the caller resolves it; once one is not (or does not
// resolve: a dial, a report of an unreachable drive), the rest are
// resolved on their goroutines, in parallel, as every large fragment's.
func WriteFragments(ctx context.Context, at Drives, st *Stripe, targets []Loc, frags [][]byte) []error {
	errs := make([]error, len(targets))
	write := func(j int, d Drive, frag []byte) {
		key := st.Key(targets[j].Index)
		err := d.WriteFragment(ctx, key, frag)
		if err != nil {
			errs[j] = fmt.Errorf("fragment %v on %v: %w", key, targets[j].Drive, err)
		}
	}
	resolve := func(j int) (Drive, bool) {
		d, err := at(targets[j].Drive)
		if err != nil {
			errs[j] = fmt.Errorf("fragment %v on %v: %w", st.Key(targets[j].Index), targets[j].Drive, err)
		}
		return d, err == nil
	}
	var wg sync.WaitGroup
	var inline []int
	ds := make([]Drive, len(targets))
	local := true            // every drive resolved so far is served in process
	var first erasure.Header // a mirror's first fragment, once sealed
	for j, t := range targets {
		frag := frags[j][:st.FragmentSize()]
		sealed := true
		switch {
		case st.K == 1 && first.CRCs != nil:
			erasure.SealCopy(frag, st.Header(t.Index), first)
		case st.K == 1:
			first = erasure.SealFragment(frag, st.Header(t.Index))
		case len(frag) <= inlineWrite:
			erasure.SealFragment(frag, st.Header(t.Index))
		default:
			// A large fragment is sealed on its writer's goroutine, in
			// parallel with the others, and its drive then checksums
			// it again (chunkstore) while its bytes are still in that
			// core's cache: sealed here, one after another, each was
			// out of the cache again by then.
			sealed = false
		}
		if local && len(frag) <= inlineWrite {
			d, ok := resolve(j)
			if ok && chunkstore.IsInProcess(d) {
				ds[j] = d
				inline = append(inline, j)
				continue
			}
			local = false
			if !ok {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				write(j, d, frag)
			}()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !sealed {
				erasure.SealFragment(frag, st.Header(t.Index))
			}
			if d, ok := resolve(j); ok {
				write(j, d, frag)
			}
		}()
	}
	for _, j := range inline {
		write(j, ds[j], frags[j][:st.FragmentSize()])
	}
	wg.Wait()
	return errs
}

// inlineWrite is the largest fragment (header included) WriteFragments
// writes in the calling goroutine to a drive served in process: a small
// file's (up to the default small-file threshold of 64 KiB).
const inlineWrite = 128 << 10

// DeleteFragments removes the fragments of st named by targets, in turn,
// best effort (an uncommitted generation's: the collector removes what is
// left). It reports the first error.
func DeleteFragments(ctx context.Context, at Drives, st *Stripe, targets []Loc) error {
	var errs []error
	for _, t := range targets {
		d, err := at(t.Drive)
		if err == nil {
			err = d.DeleteFragment(ctx, st.Key(t.Index))
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// ReadHeader reads the header of fragment i of st from drive id (d) and
// checks it (its checksum, key, shard size and stripe length) as
// ReadFragment does. The shard is not read: ReadRange checks the blocks it
// reads against the header's checksums.
func ReadHeader(ctx context.Context, d Drive, id placement.DriveID, st *Stripe, i int) (erasure.Header, error) {
	key := st.Key(i)
	b, err := d.ReadFragment(ctx, key, 0, int64(erasure.HeaderSize(st.ShardSize)), nil)
	if err != nil {
		return erasure.Header{}, fmt.Errorf("read header of %v from %v: %w", key, id, err)
	}
	h, err := erasure.DecodeHeader(b)
	if err != nil {
		return erasure.Header{}, fmt.Errorf("fragment %v on %v: %w", key, id, err)
	}
	if h.Key != key || int(h.ShardSize) != st.ShardSize || h.StripeLen != st.Len {
		return erasure.Header{}, fmt.Errorf("%w: fragment on %v is %v (shard %d, len %d), want %v (shard %d, len %d)",
			erasure.ErrCorrupt, id, h.Key, h.ShardSize, h.StripeLen, key, st.ShardSize, st.Len)
	}
	return h, nil
}

// ReadRange reads shard bytes [off, off+n) of fragment i of st from drive
// id (d), whose header h ReadHeader returned, reading only the aligned
// extent of the checksum blocks that hold them and checking those blocks'
// checksums. The bytes returned are in a buffer the caller owns: one
// alloc returned for the extent's length (Align-aligned, as direct I/O
// wants: a pooled buffer the caller hands back once done with the bytes),
// or, with alloc nil or a buffer too small, a new one. Errors are as
// ReadFragment's.
func ReadRange(ctx context.Context, d Drive, id placement.DriveID, st *Stripe, i int, h *erasure.Header, off, n int, alloc func(n int) []byte) ([]byte, error) {
	key := st.Key(i)
	a, b := h.BlockExtent(off, n)
	hs := erasure.HeaderSize(st.ShardSize)
	lo := a &^ (erasure.Align - 1)
	hi := (b + erasure.Align - 1) &^ (erasure.Align - 1)
	var dst []byte
	if alloc != nil {
		dst = alloc(hi - lo)
	}
	buf, err := d.ReadFragment(ctx, key, int64(hs+lo), int64(hi-lo), dst)
	if err != nil {
		return nil, fmt.Errorf("read %v from %v: %w", key, id, err)
	}
	if len(buf) < b-lo {
		return nil, fmt.Errorf("%w: short read of %v from %v", erasure.ErrCorrupt, key, id)
	}
	if bad := h.VerifyData(buf[a-lo:b-lo], a); len(bad) > 0 {
		return nil, fmt.Errorf("fragment on %v: %w", id, &erasure.ChecksumError{Key: key, Blocks: bad})
	}
	return buf[off-lo : off-lo+n], nil
}
