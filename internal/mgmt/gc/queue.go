package gc

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"poolfs/internal/clustermap"
	"poolfs/internal/erasure"
	"poolfs/internal/meta"
	"poolfs/internal/placement"
)

// deletes is how many queue items the collector deletes the fragments of
// at once.
const deletes = 16

// maxStuck bounds the queue items one collector run steps over because a
// drive they need is down: beyond it, the rest waits for the next run.
const maxStuck = 1 << 16

// listBatch is how many queue items past the stuck ones are read at once,
// and deleted before the queue is told (GCDone): a queue that shrinks in
// small steps shows writers held back by its size (client.Options.
// GarbageLimit) that the collector is making progress. (At 256, a batch
// of old stripe generations took seconds to delete before the queue
// shrank at all.)
const listBatch = 2 * deletes

func (c *Collector) drainQueue(ctx context.Context, m *clustermap.Map, rep *Report) error {
	// Items with a fragment on a down drive stay queued (the drive holds
	// them and will answer again, or be declared failed). GCList has no
	// cursor, so the items stepped over are counted and skipped, and do not
	// block the ones behind them.
	stuck := 0
	for stuck <= maxStuck {
		if err := c.d.Guard.Stopped(); err != nil {
			return err
		}
		items, err := c.d.Store.GCList(ctx, stuck+listBatch)
		if err != nil || len(items) <= stuck {
			return err
		}
		items = items[stuck:]
		// The commits that queued these generations must be durable before
		// their old fragments go: else a crash could bring back metadata
		// that points at deleted fragments. So must the fragments of the
		// generations that replaced them, which clients write deferred
		// (chunkstore.Deferred): else a power loss could take the new
		// generation after the old one is gone.
		if err := c.syncDrives(ctx, m); err != nil {
			return err
		}
		if err := c.d.Store.Sync(ctx); err != nil {
			return err
		}
		// The fragments of up to deletes items at once, each item's on
		// all its drives at once: one at a time, a collector behind busy
		// drives fell behind the writers (folds of the delta log replace
		// a stripe a second), and their garbage piled up on the drives.
		var (
			mu   sync.Mutex
			wg   sync.WaitGroup
			done []uint64
			sem  = make(chan struct{}, deletes)
		)
		for _, it := range items {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				errs := make([]error, len(it.Drives))
				deleted := make([]bool, len(it.Drives))
				live, err := c.liveAgain(ctx, it)
				var fw sync.WaitGroup
				for i, id := range it.Drives {
					if err != nil {
						errs[i] = err
						continue
					}
					if live[i] {
						continue // its fragment there is the stripe's again
					}
					fw.Add(1)
					go func() {
						defer fw.Done()
						key := erasure.FragmentKey{Ino: uint64(it.Ino), Stripe: it.Stripe, Gen: it.Gen, Index: uint8(i)}
						deleted[i], errs[i] = c.deleteFragment(ctx, m, placement.DriveID(id), key)
					}()
				}
				fw.Wait()
				mu.Lock()
				defer mu.Unlock()
				ok := true
				for i, err := range errs {
					if err == nil {
						if deleted[i] {
							rep.Fragments++
						} else {
							rep.Left++
						}
						continue
					}
					ok = false
					if !errors.Is(err, errDriveDown) {
						rep.Errors = append(rep.Errors, err.Error())
					}
				}
				if ok {
					done = append(done, it.Seq)
				} else {
					stuck++
				}
			}()
		}
		wg.Wait()
		if err := c.d.Store.GCDone(ctx, done); err != nil {
			return err
		}
		rep.Queued += len(done)
		if len(done) == 0 && len(items) < listBatch {
			return nil
		}
	}
	return nil
}

// liveAgain reports, per index of queued item it, whether the fragment it
// names is live: the stripe's committed record has the item's generation
// and names the same drive at that index. An item queued when fragments
// of a generation moved (a resync, a rebalance: the generation stays
// committed) names the drives they left; a later move of the same
// generation back onto such a drive (the drive away again and its
// stripes placed, by the same rule, where they were) makes that fragment
// live again, and deleting it by its key would delete live data. The item
// may wait in the queue for minutes while a drive is down.
func (c *Collector) liveAgain(ctx context.Context, it meta.GCItem) ([]bool, error) {
	recs, err := c.d.Store.StripeHeads(ctx, it.Ino, it.Stripe, it.Stripe)
	if errors.Is(err, meta.ErrNotFound) {
		return make([]bool, len(it.Drives)), nil // the file is gone: nothing of it is live
	}
	if err != nil {
		return nil, fmt.Errorf("record of inode %d stripe %d: %w", it.Ino, it.Stripe, err)
	}
	live := make([]bool, len(it.Drives))
	for _, r := range recs {
		if r.Stripe != it.Stripe || r.Gen != it.Gen {
			continue
		}
		for i, id := range it.Drives {
			live[i] = id != meta.NoDrive && i < len(r.Drives) && r.Drives[i] == id
		}
	}
	return live, nil
}

// syncDrives makes the deferred writes of every drive that is up durable
// (Drive.Sync costs nothing on a drive without any).
func (c *Collector) syncDrives(ctx context.Context, m *clustermap.Map) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, d := range m.Drives {
		if d.State != clustermap.StateUp {
			continue
		}
		wg.Add(1)
		go func(id placement.DriveID) {
			defer wg.Done()
			drv, err := c.d.Drives.Drive(m, id)
			if err == nil {
				err = drv.Sync(ctx)
			}
			if err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("sync %v before collecting: %w", id, err))
				mu.Unlock()
			}
		}(d.ID)
	}
	wg.Wait()
	return errors.Join(errs...)
}

// errDriveDown: the fragment is on a drive that is down; try again later.
var errDriveDown = errors.New("gc: drive down")

// deleteFragment deletes one fragment; a drive that is failed or gone
// holds nothing to delete, and one that is down is not asked (errDriveDown:
// the item stays queued until the drive answers again or is failed).
func (c *Collector) deleteFragment(ctx context.Context, m *clustermap.Map, id placement.DriveID, key erasure.FragmentKey) (deleted bool, err error) {
	d, err := m.Drive(id)
	if err != nil || d.State == clustermap.StateFailed || d.State == clustermap.StateOut {
		return false, nil // on no drive: nothing to delete
	}
	if d.State == clustermap.StateDown {
		return false, errDriveDown
	}
	drv, err := c.d.Drives.Drive(m, id)
	if err != nil {
		return false, err
	}
	if err := drv.DeleteFragment(ctx, key); err != nil {
		return false, fmt.Errorf("delete %v on %v: %w", key, id, err)
	}
	return true, nil
}
