package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"poolfs/internal/clustermap"
	"poolfs/internal/meta"
	"poolfs/internal/placement"
	"poolfs/internal/stripeio"
)

// readStripe reads the data shards of a committed stripe into b (laid out
// for the record's shard size) and returns them. name is used in errors
// ("" names the inode).
//
// It starts k fetches at once (stripeio.Fetch): the data fragments, with
// parity in place of any whose drive the map says is down, failed or out,
// or that this client measures as slow (stripeio.Order, c.lat); a slow
// drive due a measurement gets its fragment read as a probe beside them
// (Fetch.Probes: not waited for, used if it arrives in time). Fragments
// on down drives come last, not never: a down drive has lost nothing
// (the map marks it down because it did not answer a probe), and when
// the stripe cannot be read without it, asking is better than an error.
// A stripe short of k fragments is ErrUnavailable if enough of the
// missing ones are on down drives, ErrDataLoss otherwise. A fetch
// that fails is replaced by the next parity fragment at once; fetches
// still running after the hedging bound get as many parity fetches beside
// them. The first k verified fragments are decoded and the rest
// cancelled, so a read never waits for one late drive. Fragments that
// came back missing, unreadable or corrupt are rewritten in the
// background (read repair, repairLater), not within the read.
//
// On return no fetch writes into b any more: the buffer of a fetch still
// running is swapped out of b for a new one and left to it.
//
// A stripe that reads as lost is read once more with its record and the
// map fetched again, if either changed: a rebuild or a resync may have
// moved its fragments since the caller read the record (a mount keeps a
// file's records), and drives the cached map says are down may be back.
// If the stripe has another generation by then, the read is errStale, not
// data loss.
func (c *Client) readStripe(ctx context.Context, lay meta.Layout, ino meta.Ino, rec meta.StripeRec, b *stripeBuf, name string) ([][]byte, error) {
	shards, err := c.readStripeOnce(ctx, lay, ino, rec, b, name)
	if err == nil || !(errors.Is(err, ErrDataLoss) || errors.Is(err, ErrUnavailable)) || c.meta == nil {
		return shards, err
	}
	old, _ := c.Map(ctx)
	m, merr := c.RefreshMap(ctx)
	recs, rerr := c.meta.Stripes(ctx, ino, rec.Stripe, rec.Stripe)
	if merr != nil || rerr != nil {
		return nil, err
	}
	if len(recs) != 1 || recs[0].Gen != rec.Gen {
		// Not "data loss" in the message either: logs are grepped for it.
		return nil, fmt.Errorf("%w: %s stripe %d generation %x is no longer committed", errStale, name, rec.Stripe, rec.Gen)
	}
	fresh := rec
	fresh.Drives = recs[0].Drives
	if slices.Equal(fresh.Drives, rec.Drives) && old != nil && old.Epoch == m.Epoch {
		return nil, err // nothing changed: the stripe is lost
	}
	return c.readStripeOnce(ctx, lay, ino, fresh, b, name)
}

// errStale is a stripe read with a record that is no longer the
// stripe's: a fold, another writer or a truncation replaced its generation
// (or dropped the stripe) after the caller read the record, and the
// collector has since deleted the old generation's fragments. Nothing is
// lost: the caller reads the record again. It is a conflict
// (errors.Is(err, meta.ErrConflict)), which the write paths already take
// as "merge again over the new records"; the read paths (file_read.go)
// drop the records they hold and read again.
var errStale = fmt.Errorf("client: stripe replaced since its record was read (%w)", meta.ErrConflict)

// readStripeOnce is readStripe with the record and map it is given.
func (c *Client) readStripeOnce(ctx context.Context, lay meta.Layout, ino meta.Ino, rec meta.StripeRec, b *stripeBuf, name string) ([][]byte, error) {
	if name == "" {
		name = fmt.Sprintf("inode %d", ino) // a File opened by inode (the mount)
	}
	lay, err := recordLayout(lay, rec) // smallfile.go: the stripe's own scheme
	if err != nil {
		return nil, err
	}
	k, width := lay.K, lay.K+lay.M
	if len(rec.Drives) != width {
		return nil, fmt.Errorf("%w: %s stripe %d: record has %d drives, layout %d+%d",
			meta.ErrInvalid, name, rec.Stripe, len(rec.Drives), lay.K, lay.M)
	}
	s := int(rec.ShardSize)
	if s <= 0 || s > b.unit {
		return nil, fmt.Errorf("%w: %s stripe %d: shard size %d", meta.ErrInvalid, name, rec.Stripe, s)
	}
	m, err := c.Map(ctx)
	if err != nil {
		return nil, err
	}
	st := &stripeio.Stripe{Ino: uint64(ino), Stripe: rec.Stripe, Gen: rec.Gen, K: lay.K, M: lay.M, Pool: lay.Pool,
		Len: rec.Len, ShardSize: s}
	drives := make([]placement.DriveID, width)
	for i, id := range rec.Drives {
		drives[i] = placement.DriveID(id)
	}
	now := time.Now()
	f := &stripeio.Fetch{Stripe: st, Need: k, At: stripeio.OnMap(c.drives, m), Bufs: b.frags, Hedge: c.lat}
	isDown := func(id placement.DriveID) bool {
		d, err := m.Drive(id)
		return err == nil && d.State == clustermap.StateDown
	}
	f.Sources, f.Errs = stripeio.Order(st, drives, func(id placement.DriveID) error {
		if d, err := m.Drive(id); err == nil && knownMissing(d.State) {
			return fmt.Errorf("drive %v is %s at map epoch %d", id, d.State, m.Epoch)
		}
		return nil
	}, func(id placement.DriveID) bool { return isDown(id) || c.lat.Avoid(id) || c.avoids(m, id, now) })
	for _, src := range f.Sources {
		// A slow drive is measured beside the read, not within it.
		if !isDown(src.Drive) && !c.avoids(m, src.Drive, now) && c.lat.Probe(src.Drive, now) {
			f.Probes = append(f.Probes, src)
		}
	}
	got, err := f.Get(ctx)
	if err != nil {
		return nil, fmt.Errorf("file %s stripe %d: %w", name, rec.Stripe, err)
	}
	if got.OK < k {
		down := 0
		for i, id := range drives {
			if got.Shards[i] == nil && isDown(id) {
				down++
			}
		}
		lost := ErrDataLoss
		if got.OK+down >= k {
			lost = ErrUnavailable
		}
		return nil, fmt.Errorf("%w: file %s stripe %d: %d of %d fragments unreadable (%d on drives that are down), %d+%d survives %d: %v",
			lost, name, rec.Stripe, width-got.OK, width, down, lay.K, lay.M, lay.M, errors.Join(got.Errs...))
	}
	complete := true
	for i := 0; i < k; i++ {
		complete = complete && got.Shards[i] != nil
	}
	if complete && len(got.Failed) == 0 {
		return got.Shards[:k], nil
	}
	for i := 0; i < k; i++ {
		if got.Shards[i] == nil {
			got.Shards[i] = b.shard(i, s)[:0] // reconstructed into b
		}
	}
	if err := stripeio.Reconstruct(&c.codecs, st, got.Shards, got.Failed); err != nil {
		return nil, fmt.Errorf("%w: file %s stripe %d: %v", ErrDataLoss, name, rec.Stripe, err)
	}
	c.repairLater(m, st, rec, got.Shards, got.Failed, got.Errs)
	return got.Shards[:k], nil
}

// knownMissing reports whether fragments on a drive in state st are not
// worth asking for: the drive failed or left the pool (a down drive is
// asked last, readStripeOnce).
func knownMissing(st clustermap.DriveState) bool {
	return st == clustermap.StateFailed || st == clustermap.StateOut
}

// deleteFragments removes the fragments of an uncommitted stripe that were
// written (errs[i] == nil), best effort.
func (c *Client) deleteFragments(m *clustermap.Map, ino meta.Ino, rec meta.StripeRec, errs []error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st := &stripeio.Stripe{Ino: uint64(ino), Stripe: rec.Stripe, Gen: rec.Gen}
	var written []stripeio.Loc
	for i, id := range rec.Drives {
		if errs[i] == nil {
			written = append(written, stripeio.Loc{Index: i, Drive: placement.DriveID(id)})
		}
	}
	_ = stripeio.DeleteFragments(ctx, stripeio.OnMap(c.drives, m), st, written)
}
