package mgmt

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"
	"time"

	"poolfs/internal/clustermap"
	"poolfs/internal/erasure"
	"poolfs/internal/meta"
	"poolfs/internal/placement"
)

// GCArgs selects what one collector run does.
type GCArgs struct {
	// Orphans also scans every drive for fragments that no committed
	// generation references and removes those older than Grace, and removes
	// unfinished Put files older than Grace.
	Orphans bool          `json:"orphans"`
	Grace   time.Duration `json:"grace"`
}

// GCReport says what a collector run removed.
type GCReport struct {
	Queued        int      `json:"queued"`     // GC queue items processed
	Fragments     int      `json:"fragments"`  // fragments deleted for them
	Orphans       int      `json:"orphans"`    // uncommitted fragments deleted
	TempFiles     int      `json:"temp_files"` // unfinished put files removed
	Scanned       int      `json:"scanned"`    // fragments examined by the orphan scan
	Errors        []string `json:"errors,omitempty"`
	DurationNanos int64    `json:"duration_ns"`
}

// GC runs the collector once: the queue of replaced and removed
// generations, then (with Orphans) the scan for fragments never committed.
// It deletes nothing once an integrity check found the store corrupt
// (ErrDeletionStopped), and the orphan scan runs only after a full
// integrity check of the store passed (else an error wrapping
// meta.ErrStoreCorrupt).
func (s *Service) GC(ctx context.Context, a GCArgs) (*GCReport, error) {
	start := time.Now()
	rep := &GCReport{}
	if err := s.deletionStopped(); err != nil {
		return nil, err
	}
	if a.Orphans {
		// The scan deletes every fragment the store does not name: a store
		// that lost records would name too few.
		if err := s.CheckStore(ctx, true); err != nil {
			return nil, fmt.Errorf("gc --orphans: the metadata store must be verified sound before any fragment it does not name is deleted: %w", err)
		}
	}
	m, err := s.Map(ctx)
	if err != nil {
		return nil, err
	}
	if a.Orphans {
		if err := s.removeTempFiles(ctx, meta.RootIno, "/", a.Grace, rep); err != nil {
			return nil, err
		}
	}
	if err := s.drainQueue(ctx, m, rep); err != nil {
		return nil, err
	}
	if a.Orphans {
		if err := s.scanOrphans(ctx, m, a.Grace, rep); err != nil {
			return nil, err
		}
	}
	rep.DurationNanos = int64(time.Since(start))
	return rep, nil
}

// gcDeletes is how many queue items the collector deletes the fragments
// of at once.
const gcDeletes = 16

// maxStuck bounds the queue items one collector run steps over because a
// drive they need is down: beyond it, the rest waits for the next run.
const maxStuck = 1 << 16

func (s *Service) drainQueue(ctx context.Context, m *clustermap.Map, rep *GCReport) error {
	// Items with a fragment on a down drive stay queued (the drive holds
	// them and will answer again, or be declared failed). GCList has no
	// cursor, so the items stepped over are counted and skipped, and do not
	// block the ones behind them.
	stuck := 0
	for stuck <= maxStuck {
		if err := s.deletionStopped(); err != nil {
			return err
		}
		items, err := s.store.GCList(ctx, stuck+256)
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
		if err := s.syncDrives(ctx, m); err != nil {
			return err
		}
		if err := s.store.Sync(ctx); err != nil {
			return err
		}
		// The fragments of up to gcDeletes items at once, each item's on
		// all its drives at once: one at a time, a collector behind busy
		// drives fell behind the writers (folds of the delta log replace
		// a stripe a second), and their garbage piled up on the drives.
		var (
			mu   sync.Mutex
			wg   sync.WaitGroup
			done []uint64
			sem  = make(chan struct{}, gcDeletes)
		)
		for _, it := range items {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				errs := make([]error, len(it.Drives))
				var fw sync.WaitGroup
				for i, id := range it.Drives {
					fw.Add(1)
					go func() {
						defer fw.Done()
						key := erasure.FragmentKey{Ino: uint64(it.Ino), Stripe: it.Stripe, Gen: it.Gen, Index: uint8(i)}
						errs[i] = s.deleteFragment(ctx, m, placement.DriveID(id), key)
					}()
				}
				fw.Wait()
				mu.Lock()
				defer mu.Unlock()
				ok := true
				for _, err := range errs {
					if err == nil {
						rep.Fragments++
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
		if err := s.store.GCDone(ctx, done); err != nil {
			return err
		}
		rep.Queued += len(done)
		if len(done) == 0 && len(items) < 256 {
			return nil
		}
	}
	return nil
}

// syncDrives makes the deferred writes of every drive that is up durable
// (Drive.Sync costs nothing on a drive without any).
func (s *Service) syncDrives(ctx context.Context, m *clustermap.Map) error {
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
			drv, err := s.drives.Drive(m, id)
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
var errDriveDown = errors.New("mgmt: drive down")

// deleteFragment deletes one fragment; a drive that is failed or gone
// holds nothing to delete, and one that is down is not asked (errDriveDown:
// the item stays queued until the drive answers again or is failed).
func (s *Service) deleteFragment(ctx context.Context, m *clustermap.Map, id placement.DriveID, key erasure.FragmentKey) error {
	d, err := m.Drive(id)
	if err != nil || d.State == clustermap.StateFailed || d.State == clustermap.StateOut {
		return nil
	}
	if d.State == clustermap.StateDown {
		return errDriveDown
	}
	drv, err := s.drives.Drive(m, id)
	if err != nil {
		return err
	}
	if err := drv.DeleteFragment(ctx, key); err != nil {
		return fmt.Errorf("delete %v on %v: %w", key, id, err)
	}
	return nil
}

func (s *Service) scanOrphans(ctx context.Context, m *clustermap.Map, grace time.Duration, rep *GCReport) error {
	cutoff := time.Now().Add(-grace)
	for _, d := range m.Drives {
		if d.State != clustermap.StateUp {
			continue
		}
		drv, err := s.drives.Drive(m, d.ID)
		if err != nil {
			rep.Errors = append(rep.Errors, err.Error())
			continue
		}
		if err := s.deletionStopped(); err != nil {
			return err
		}
		var orphans []erasure.FragmentKey
		err = drv.ListFragments(ctx, func(k erasure.FragmentKey, size int64, mtime time.Time) error {
			rep.Scanned++
			if mtime.After(cutoff) {
				return nil
			}
			ok, err := s.store.Committed(ctx, meta.Ino(k.Ino), k.Stripe, k.Gen)
			if err != nil {
				return err
			}
			if !ok {
				orphans = append(orphans, k)
			}
			return nil
		})
		if err != nil {
			rep.Errors = append(rep.Errors, fmt.Sprintf("scan %v: %v", d.ID, err))
			continue
		}
		for _, k := range orphans {
			if err := drv.DeleteFragment(ctx, k); err != nil {
				rep.Errors = append(rep.Errors, err.Error())
				continue
			}
			rep.Orphans++
		}
	}
	return nil
}

// tempPrefix is client.Put's prefix for unfinished files.
const tempPrefix = ".poolfs-put."

// removeTempFiles walks the namespace and unlinks unfinished Put files
// older than grace (their stripes go to the GC queue).
func (s *Service) removeTempFiles(ctx context.Context, dir meta.Ino, dpath string, grace time.Duration, rep *GCReport) error {
	cutoff := time.Now().Add(-grace).UnixNano()
	after := ""
	for {
		ents, err := s.store.Readdir(ctx, dir, after, 1024)
		if err != nil {
			return err
		}
		for _, e := range ents {
			switch {
			case e.Type == meta.TypeDir:
				if err := s.removeTempFiles(ctx, e.Ino, path.Join(dpath, e.Name), grace, rep); err != nil {
					return err
				}
			case e.Type == meta.TypeFile && strings.HasPrefix(e.Name, tempPrefix):
				a, err := s.store.Getattr(ctx, e.Ino)
				if err != nil || a.Mtime > cutoff {
					continue
				}
				if err := s.store.Unlink(ctx, dir, e.Name); err == nil {
					rep.TempFiles++
					s.log.Info("removed unfinished put", "path", path.Join(dpath, e.Name))
				}
			}
		}
		if len(ents) < 1024 {
			return nil
		}
		after = ents[len(ents)-1].Name
	}
}
