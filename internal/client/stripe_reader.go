package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"poolfs/internal/clustermap"
	"poolfs/internal/erasure"
	"poolfs/internal/meta"
	"poolfs/internal/placement"
	"poolfs/internal/stripeio"
)

// readStripe reads the data shards of a committed stripe into b (laid out
// for the record's shard size) and returns them. name is used in errors
// ("" names the inode).
//
// It starts k fetches at once: the data fragments, with parity in place of
// any whose drive the map says is down, failed or out, or that this client
// measures as slow (latency.go). A fetch that fails is replaced by the
// next parity fragment at once; fetches still running after the hedging
// bound get as many parity fetches beside them. The first k verified
// fragments are decoded and the rest cancelled, so a read never waits for
// one late drive. Fragments that came back missing, unreadable or corrupt
// are rewritten in the background (read repair, repairLater), not within
// the read.
//
// On return no fetch writes into b any more: the buffer of a fetch still
// running is swapped out of b for a new one and left to it.
func (c *Client) readStripe(ctx context.Context, lay meta.Layout, ino meta.Ino, rec meta.StripeRec, b *stripeBuf, name string) ([][]byte, error) {
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
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st := &stripeio.Stripe{Ino: uint64(ino), Stripe: rec.Stripe, Gen: rec.Gen, K: lay.K, M: lay.M, Pool: lay.Pool,
		Len: rec.Len, ShardSize: s}
	r := &stripeRead{c: c, m: m, st: st, rec: rec, b: b,
		shards: make([][]byte, width), errs: make([]error, width), state: make([]fetchState, width),
		results: make(chan fetchResult, width)}
	r.plan(k, width)
	ok, err := r.run(ctx, k)
	r.release()
	if err != nil {
		return nil, fmt.Errorf("file %s stripe %d: %w", name, rec.Stripe, err)
	}
	if ok < k {
		return nil, fmt.Errorf("%w: file %s stripe %d: %d of %d fragments unavailable, %d+%d survives %d: %v",
			ErrDataLoss, name, rec.Stripe, width-ok, width, lay.K, lay.M, lay.M, errors.Join(r.errs...))
	}
	complete := true
	for i := 0; i < k; i++ {
		complete = complete && r.state[i] == fetchOK
	}
	lost := r.lost()
	if complete && len(lost) == 0 {
		return r.shards[:k], nil
	}
	cd, err := c.codecs.Get(lay.K, lay.M)
	if err != nil {
		return nil, err
	}
	dataOnly := true
	for i := range r.shards {
		if r.state[i] == fetchOK {
			continue
		}
		r.shards[i] = nil
		if i < k {
			r.shards[i] = b.shard(i, s)[:0] // reconstructed into b
		}
	}
	for _, i := range lost {
		dataOnly = dataOnly && i < k
	}
	if err := cd.Reconstruct(r.shards, dataOnly); err != nil {
		return nil, fmt.Errorf("%w: file %s stripe %d: %v", ErrDataLoss, name, rec.Stripe, err)
	}
	c.repairLater(m, st, rec, r.shards, lost, r.errs)
	return r.shards[:k], nil
}

// fetchState is where one fragment of a stripeRead is.
type fetchState uint8

const (
	fetchIdle     fetchState = iota // not asked for (yet)
	fetchSkipped                    // its drive is known not to answer
	fetchInFlight                   // being read
	fetchOK                         // read and verified
	fetchFailed                     // missing, unreadable or corrupt
)

type fetchResult struct {
	i    int
	data []byte
	err  error
}

// stripeRead is the state of one readStripe. Only the goroutine running
// readStripe touches it; fetches report through results.
type stripeRead struct {
	c      *Client
	m      *clustermap.Map
	st     *stripeio.Stripe
	rec    meta.StripeRec
	b      *stripeBuf
	shards [][]byte
	errs   []error
	state  []fetchState
	// order is the fragments to fetch, best first: data fragments, then
	// parity, then those of drives this client measures as slow.
	order    []int
	next     int // order[next] is the next fragment to start
	inflight int
	results  chan fetchResult
}

// plan orders the fragments and marks those whose drives are known not to
// answer.
//
// The parity fragments are taken starting at one that rotates with the
// stripe number, so that the reads a missing drive puts on parity are
// spread over all the parity fragments' drives.
func (r *stripeRead) plan(k, width int) {
	now := time.Now()
	var slow []int
	for n := 0; n < width; n++ {
		i := n
		if n >= k {
			i = k + (n-k+int(r.rec.Stripe%uint64(width-k)))%(width-k)
		}
		id := placement.DriveID(r.rec.Drives[i])
		if d, err := r.m.Drive(id); err == nil && knownMissing(d.State) {
			r.state[i] = fetchSkipped
			r.errs[i] = fmt.Errorf("drive %v is %s at map epoch %d", id, d.State, r.m.Epoch)
			continue
		}
		if r.c.lat.avoid(id, now) {
			slow = append(slow, i)
			continue
		}
		r.order = append(r.order, i)
	}
	r.order = append(r.order, slow...)
}

// knownMissing reports whether fragments on a drive in state st are not
// worth asking for.
func knownMissing(st clustermap.DriveState) bool {
	return st == clustermap.StateDown || st == clustermap.StateFailed || st == clustermap.StateOut
}

// run fetches until k fragments are verified or none is left to try and
// returns how many were. It returns an error only if ctx ends.
func (r *stripeRead) run(ctx context.Context, k int) (int, error) {
	r.start(ctx, k)
	bound := r.c.lat.bound()
	hedge := time.NewTimer(bound)
	defer hedge.Stop()
	ok := 0
	for ok < k && r.inflight > 0 {
		select {
		case res := <-r.results:
			r.inflight--
			if res.err != nil {
				r.state[res.i], r.errs[res.i] = fetchFailed, res.err
				r.start(ctx, 1)
				continue
			}
			r.state[res.i], r.shards[res.i] = fetchOK, res.data
			ok++
		case <-hedge.C:
			// Every fetch still running is late: start one more beside each.
			r.start(ctx, r.inflight)
			if r.next < len(r.order) {
				hedge.Reset(bound)
			}
		case <-ctx.Done():
			return ok, ctx.Err()
		}
	}
	return ok, nil
}

// start starts up to n more fetches, in order.
func (r *stripeRead) start(ctx context.Context, n int) {
	for ; n > 0 && r.next < len(r.order); n-- {
		i := r.order[r.next]
		r.next++
		r.state[i] = fetchInFlight
		r.inflight++
		buf := r.b.frags[i]
		go func() {
			t0 := time.Now()
			data, err := r.c.fetchOne(ctx, r.m, r.st, r.rec, buf, i)
			if err == nil || ctx.Err() != nil {
				// A fetch given up still tells that the drive took at least this long.
				r.c.lat.observe(placement.DriveID(r.rec.Drives[i]), time.Since(t0))
			}
			r.results <- fetchResult{i: i, data: data, err: err}
		}()
	}
}

// release gives every fetch still running the buffer it reads into, and
// b a new one in its place, so that b can be used and reused at once.
func (r *stripeRead) release() {
	for i, st := range r.state {
		if st == fetchInFlight {
			r.b.frags[i] = erasure.AlignedBuffer(cap(r.b.frags[i]))
			r.state[i] = fetchIdle
		}
	}
}

// lost returns the fragments that a drive answered for with an error: read
// repair rewrites them.
func (r *stripeRead) lost() []int {
	var lost []int
	for i, st := range r.state {
		if st == fetchFailed {
			lost = append(lost, i)
		}
	}
	return lost
}

// fetchOne reads fragment i of a stripe into buf and checks its header and
// checksums; it returns the verified shard.
func (c *Client) fetchOne(ctx context.Context, m *clustermap.Map, st *stripeio.Stripe, rec meta.StripeRec, buf []byte, i int) ([]byte, error) {
	id := placement.DriveID(rec.Drives[i])
	d, err := c.drives.Drive(m, id)
	if err != nil {
		return nil, err
	}
	return stripeio.ReadFragment(ctx, d, id, st, i, buf)
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
