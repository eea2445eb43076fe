package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"poolfs/internal/chunkstore"
	"poolfs/internal/clustermap"
	"poolfs/internal/erasure"
	"poolfs/internal/meta"
	"poolfs/internal/rpc"
	"poolfs/internal/storage"
	"poolfs/internal/stripeio"
)

// genEpoch is the origin of generation timestamps.
var genEpoch = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)

// newGen returns a fresh generation number greater than after. The high 38
// bits count sixteenths of a second since 2020 (so generations grow with
// time, which makes them readable), the low 25 bits are random, so two
// writers racing on one stripe practically never pick the same generation
// (and the metadata store's compare-and-set decides which one wins).
func newGen(after uint64) uint64 {
	t := uint64(time.Since(genEpoch) / (time.Second / 16))
	if base := after>>25 + 1; t < base {
		t = base
	}
	return (t<<25 | rand.Uint64()&(1<<25-1)) &^ (1 << 63)
}

// writeStripe encodes a stripe whose l user bytes are already in b's data
// shards (laid out for shard size s), writes its k+m fragments to the
// drives of its placement group, and returns the record to commit. It does
// not commit. On error, fragments already written are deleted (best effort;
// the collector removes what is left).
func (c *Client) writeStripe(ctx context.Context, lay meta.Layout, ino meta.Ino, stripe, oldGen uint64, b *stripeBuf, l int) (meta.StripeRec, error) {
	if oldGen != 0 {
		// Its commit sends generation oldGen to the collector.
		if err := c.garbage.wait(ctx); err != nil {
			return meta.StripeRec{}, err
		}
	}
	lay = c.writeLayout(ctx, lay, stripe, l) // smallfile.go: a small file's stripe 0 is a mirror
	cd, err := c.codecs.Get(lay.K, lay.M)
	if err != nil {
		return meta.StripeRec{}, err
	}
	s := erasure.ShardSize(l, lay.K, int(lay.Unit))
	b.relayout(lay.K, l, s)
	if err := cd.Encode(b.shards(s)[:lay.K+lay.M]); err != nil {
		return meta.StripeRec{}, fmt.Errorf("encode stripe %d of inode %d: %w", stripe, ino, err)
	}
	write := func() (meta.StripeRec, error) {
		rec, err := c.placeAndWrite(ctx, lay, ino, stripe, oldGen, b, s, l)
		if err != nil && driveGone(err) {
			// A drive failed or left since this client fetched the map:
			// the next epoch places the stripe on drives that are up.
			if _, rerr := c.RefreshMap(ctx); rerr == nil {
				rec, err = c.placeAndWrite(ctx, lay, ino, stripe, oldGen, b, s, l)
			}
		}
		return rec, err
	}
	// Tried again while a drive is full of old fragments waiting for the
	// collector, or of the writes in flight (full_retry.go).
	rec, err := fullRetry(ctx, oldGen != 0, &c.fullStuck, fullWait, c.garbage.drain, write)
	if err != nil {
		return meta.StripeRec{}, fmt.Errorf("write stripe %d of inode %d: %w", stripe, ino, err)
	}
	return rec, nil
}

// driveGone reports whether a write failed because a drive is dead or no
// longer where the map said.
func driveGone(err error) bool {
	return errors.Is(err, chunkstore.ErrFailed) || errors.Is(err, storage.ErrNoDrive) ||
		errors.Is(err, rpc.ErrUnavailable) || errors.Is(err, clustermap.ErrNoDrive)
}

// placeAndWrite picks the drives of the stripe's PG at the current epoch
// (the map's stripe order: consecutive stripes of a file spread evenly
// over servers and drives; the PG is stored in the record)
// and writes the k+m sealed fragments of a new generation to them in
// parallel. On error the fragments written are deleted (best effort).
func (c *Client) placeAndWrite(ctx context.Context, lay meta.Layout, ino meta.Ino, stripe, oldGen uint64, b *stripeBuf, s, l int) (meta.StripeRec, error) {
	m, pm, err := c.writePGMap(ctx, lay.Pool) // unreachable.go: around servers this client cannot reach
	if err != nil {
		return meta.StripeRec{}, err
	}
	pg := c.stripeOrder(lay.Pool, pm).PG(uint64(ino), stripe)
	set := pm.Sets[pg]
	if len(set) < lay.K+lay.M {
		return meta.StripeRec{}, fmt.Errorf("client: PG %d of pool %d has %d drives, layout needs %d+%d",
			pg, lay.Pool, len(set), lay.K, lay.M)
	}
	set = set[:lay.K+lay.M] // a narrow stripe uses the first K+M drives of its PG
	rec := meta.StripeRec{Stripe: stripe, Gen: newGen(oldGen), PG: pg, Len: uint32(l), ShardSize: uint32(s),
		Drives: make([]uint32, len(set)), K: lay.K}
	for i, d := range set {
		rec.Drives[i] = uint32(d)
	}
	// A drive at its client write limit still takes a fragment that
	// replaces one of oldGen it holds (storage.Replacing).
	wctx := storage.Replacing(ctx, oldGen)
	st := &stripeio.Stripe{Ino: uint64(ino), Stripe: stripe, Gen: rec.Gen, K: lay.K, M: lay.M, Pool: lay.Pool,
		Len: uint32(l), ShardSize: s}
	targets := make([]stripeio.Loc, len(set))
	frags := make([][]byte, len(set))
	for i, d := range set {
		targets[i], frags[i] = stripeio.Loc{Index: i, Drive: d}, b.frag(i, s)
	}
	wctx, stop := c.watchTargets(wctx, m, rec.Drives) // write_watch.go
	errs := stripeio.WriteFragments(wctx, c.progressDrives(m, stripeio.OnMap(c.drives, m)), st, targets, frags)
	gone := targetDown(wctx)
	stop()
	for i, err := range errs {
		if errors.Is(err, rpc.ErrUnavailable) {
			// Not answering this client (reported already by the
			// drives the client gets): if the map keeps it up, the
			// stripe's next placement goes around its server all
			// the same (unreachable.go).
			c.unreachable(m, set[i], false)
		}
	}
	if err := errors.Join(append(errs, gone)...); err != nil {
		c.deleteFragments(m, ino, rec, errs)
		if errors.Is(err, chunkstore.ErrFull) {
			// A drive filled up before the pool's accounting did (placement
			// is balanced only on average): the pool is full all the same.
			err = fmt.Errorf("%w: %w", ErrPoolFull, err)
		}
		return meta.StripeRec{}, err
	}
	if chunkstore.IsDeferred(ctx) {
		c.noteDeferred(rec.Drives) // before the commit that names them (sync.go)
	}
	return rec, nil
}
