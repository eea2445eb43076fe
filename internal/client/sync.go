package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"poolfs/internal/chunkstore"
	"poolfs/internal/clustermap"
	"poolfs/internal/placement"
)

// Durability (see docs/durability.md).
//
// A File's stripes are written as deferred fragment writes
// (chunkstore.Deferred): when Flush (close) returns, the fragments are on
// their drives, visible, and the stripe records are committed, so any
// client that opens the file afterwards reads the new bytes; but neither
// the fragments nor the commit need be durable yet. Client.Sync (fsync,
// fdatasync, fsync of a directory, syncfs) makes them durable in order:
// first every drive this client wrote deferred fragments to since its
// last Sync (one Drive.Sync per drive, which covers all of them: the group
// commit of many small files' fragments), then the metadata service
// (meta.Store.Sync). Fragments are durable before the records that name
// them, as far as this client's syncs decide it.
//
// unsynced is the set of drives with deferred writes no Sync of this
// client covered. A drive enters it after its write returned and before
// the commit naming the fragment, so a Sync that starts after a Flush
// returned finds every drive that Flush wrote to.
type unsynced struct {
	// syncing is held for a whole Client.Sync: a Sync that starts while
	// another runs waits for it, then syncs what is left, so it never
	// returns before drives taken by the other are synced.
	syncing sync.Mutex
	mu      struct {
		sync.Mutex
		drives map[placement.DriveID]struct{}
		// timer runs the background Sync (Options.SyncDelay), armed by
		// the first add after a Sync took the set.
		timer *time.Timer
	}
}

// add records deferred writes to drives; if it is the first since a Sync
// took the set and delay > 0, it arms a background sync in delay.
func (u *unsynced) add(drives []uint32, delay time.Duration, sync func()) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.mu.drives == nil {
		u.mu.drives = map[placement.DriveID]struct{}{}
	}
	for _, d := range drives {
		u.mu.drives[placement.DriveID(d)] = struct{}{}
	}
	if delay > 0 && u.mu.timer == nil && len(u.mu.drives) > 0 {
		u.mu.timer = time.AfterFunc(delay, sync)
	}
}

// take returns the drives and empties the set, disarming the background
// sync (the caller syncs them).
func (u *unsynced) take() []placement.DriveID {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.mu.timer != nil {
		u.mu.timer.Stop()
		u.mu.timer = nil
	}
	ids := make([]placement.DriveID, 0, len(u.mu.drives))
	for id := range u.mu.drives {
		ids = append(ids, id)
	}
	clear(u.mu.drives)
	return ids
}

// Closed files do not wait for an fsync forever: Options.SyncDelay after
// the first deferred write no Sync covered, the client runs Client.Sync in
// the background, so a power loss takes at most about that much of what
// was closed (and nothing that was fsynced).

// Sync makes everything this client wrote and committed before the call
// durable: the fragments of its Files' stripes (Drive.Sync on every drive
// that took deferred writes from it, in parallel), then the metadata
// service's commits. A drive that fails to sync stays in the set, so the
// next Sync tries it again (and a drive whose sync failed keeps failing:
// its failure is sticky), and the error names it. A drive the map says is
// not up is skipped: what it held is restored from the other fragments of
// its stripes, as for any drive that fails; so is one whose sync failed
// and that the map, fetched again after the failure, says is no longer up
// (syncErrors).
func (c *Client) Sync(ctx context.Context) error {
	if err := c.syncDrives(ctx); err != nil {
		return err
	}
	return c.syncMeta(ctx)
}

// noteDeferred records that fragments of rec were written deferred.
func (c *Client) noteDeferred(drives []uint32) {
	c.unsynced.add(drives, c.opts.SyncDelay, c.backgroundSync)
}

// backgroundSync is the Sync that Options.SyncDelay schedules; a failure
// is logged (the drives stay unsynced, and fsync reports it).
func (c *Client) backgroundSync() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.Sync(ctx); err != nil {
		c.log.Warn("client: background sync of closed files failed (fsync will report it)", "err", err)
	}
}

// syncDrives syncs the drives in c.unsynced.
func (c *Client) syncDrives(ctx context.Context) error {
	u := &c.unsynced
	u.syncing.Lock()
	defer u.syncing.Unlock()
	ids := u.take()
	if len(ids) == 0 {
		return nil
	}
	m, err := c.Map(ctx)
	if err != nil {
		c.noteDeferred(driveNums(ids))
		return err
	}
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		if d, err := m.Drive(id); err == nil && d.State != clustermap.StateUp {
			// Down, failed or out: its fragments are rebuilt from the
			// stripes' others (which this Sync makes durable), like any
			// fragment a drive loses; waiting for it would hold every
			// fsync of the client until it is back or replaced.
			continue
		}
		if c.avoids(m, id, time.Now()) {
			// Unreachable from this client (unreachable.go): the same
			// holds, and a sync would wait for ever; a fragment its
			// server loses unsynced is found and restored by scrub.
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := c.drives.Drive(m, id)
			if err == nil {
				err = d.Sync(ctx)
			}
			if err != nil {
				errs[i] = fmt.Errorf("sync drive %v: %w", id, err)
				c.noteDeferred([]uint32{uint32(id)})
			}
		}()
	}
	wg.Wait()
	return c.syncErrors(ctx, ids, errs)
}

// syncErrors is the error of a syncDrives pass whose sync of ids[i] failed
// with errs[i]. A drive whose failed sync was reported (the drives the
// client gets report their errors) and that the map, fetched again, now
// says is down, failed or out is skipped as if it had been so before: its
// fragments are restored from the others of their stripes, which this pass
// made durable. A drive still up fails the sync.
func (c *Client) syncErrors(ctx context.Context, ids []placement.DriveID, errs []error) error {
	if errors.Join(errs...) == nil {
		return nil
	}
	m, err := c.RefreshMap(ctx)
	if err != nil {
		return errors.Join(errs...)
	}
	var left []error
	for i, id := range ids {
		if errs[i] == nil {
			continue
		}
		if d, err := m.Drive(id); err == nil && d.State != clustermap.StateUp {
			continue
		}
		left = append(left, errs[i])
	}
	return errors.Join(left...)
}

func driveNums(ids []placement.DriveID) []uint32 {
	out := make([]uint32, len(ids))
	for i, id := range ids {
		out[i] = uint32(id)
	}
	return out
}

// deferred marks ctx's fragment writes deferred (File writes).
func deferred(ctx context.Context) context.Context { return chunkstore.Deferred(ctx) }
