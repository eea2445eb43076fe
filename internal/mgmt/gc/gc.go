package gc

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"poolfs/internal/clustermap"
	"poolfs/internal/erasure"
	"poolfs/internal/meta"
	"poolfs/internal/placement"
)

// Store is what the collector needs of the metadata store (a
// *meta.Store is one).
type Store interface {
	// GCList returns up to limit queued items, oldest first; GCDone
	// removes the items of the given sequence numbers.
	GCList(ctx context.Context, limit int) ([]meta.GCItem, error)
	GCDone(ctx context.Context, seqs []uint64) error
	// Sync makes every commit made before it durable.
	Sync(ctx context.Context) error
	// Committed reports whether generation gen of the stripe is committed.
	Committed(ctx context.Context, ino meta.Ino, stripe, gen uint64) (bool, error)
	// StripeHeads returns the committed records of stripes first..last
	// (without their delta extents).
	StripeHeads(ctx context.Context, ino meta.Ino, first, last uint64) ([]meta.StripeRec, error)
	// The namespace, walked for unfinished put files.
	Readdir(ctx context.Context, ino meta.Ino, after string, limit int) ([]meta.Dirent, error)
	Getattr(ctx context.Context, ino meta.Ino) (meta.Attr, error)
	Unlink(ctx context.Context, parent meta.Ino, name string) error
}

// Drive is what the collector asks of one drive (a chunkstore.Drive is
// one).
type Drive interface {
	// DeleteFragment removes a fragment; a missing one is not an error.
	DeleteFragment(ctx context.Context, key erasure.FragmentKey) error
	// ListFragments calls fn for every complete fragment.
	ListFragments(ctx context.Context, fn func(key erasure.FragmentKey, size int64, mtime time.Time) error) error
	// Sync makes the drive's deferred writes durable.
	Sync(ctx context.Context) error
}

// Drives resolves a drive of the map to a Drive, as a storage dialer does:
// whatever the map says of its state.
type Drives interface {
	Drive(m *clustermap.Map, id placement.DriveID) (Drive, error)
}

// DrivesFunc adapts a function to Drives.
type DrivesFunc func(m *clustermap.Map, id placement.DriveID) (Drive, error)

// Drive calls f.
func (f DrivesFunc) Drive(m *clustermap.Map, id placement.DriveID) (Drive, error) { return f(m, id) }

// Maps returns the current cluster map; the collector does not change it.
type Maps interface {
	Map(ctx context.Context) (*clustermap.Map, error)
}

// Guard says whether the metadata store may be trusted with deletions.
type Guard interface {
	// Stopped returns a non-nil error once deletion must stop (the store
	// was found corrupt); the collector returns it as it is.
	Stopped() error
	// Verify runs the store's full integrity check: nil if it passed.
	Verify(ctx context.Context) error
}

// Deps are a collector's dependencies. Store, Drives, Maps and Guard are
// required; Log defaults to discarding, Now to time.Now.
type Deps struct {
	Store  Store
	Drives Drives
	Maps   Maps
	Guard  Guard
	Log    *slog.Logger
	Now    func() time.Time
}

// Collector runs collections. Runs may overlap (each item is deleted at
// most once from the queue; deleting a fragment twice is harmless).
type Collector struct {
	d Deps
}

// New returns a collector over d. It panics if a required dependency is
// missing: that is a wiring mistake.
func New(d Deps) *Collector {
	if d.Store == nil || d.Drives == nil || d.Maps == nil || d.Guard == nil {
		panic("gc: New needs a Store, Drives, Maps and a Guard")
	}
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	return &Collector{d: d}
}

// Args selects what one collector run does.
type Args struct {
	// Orphans also scans every drive for fragments that no committed
	// generation references and removes those older than Grace, and removes
	// unfinished Put files older than Grace.
	Orphans bool          `json:"orphans"`
	Grace   time.Duration `json:"grace"`
}

// Report says what a collector run removed.
type Report struct {
	Queued    int `json:"queued"`    // GC queue items processed
	Fragments int `json:"fragments"` // fragments deleted for them
	// Left counts their fragments not deleted because there was nothing
	// to delete (on a failed or removed drive, or none) or the stripe
	// uses them again (moved back onto the drive).
	Left          int      `json:"left,omitempty"`
	Orphans       int      `json:"orphans"`    // uncommitted fragments deleted
	TempFiles     int      `json:"temp_files"` // unfinished put files removed
	Scanned       int      `json:"scanned"`    // fragments examined by the orphan scan
	Errors        []string `json:"errors,omitempty"`
	DurationNanos int64    `json:"duration_ns"`
}

// Run runs the collector once: the queue of replaced and removed
// generations, then (with Orphans) the scan for fragments never committed.
// It deletes nothing once the Guard says deletion stopped (its error), and
// the orphan scan runs only after the Guard verified the store (else an
// error wrapping Verify's).
func (c *Collector) Run(ctx context.Context, a Args) (*Report, error) {
	start := c.d.Now()
	rep := &Report{}
	if err := c.d.Guard.Stopped(); err != nil {
		return nil, err
	}
	if a.Orphans {
		// The scan deletes every fragment the store does not name: a store
		// that lost records would name too few.
		if err := c.d.Guard.Verify(ctx); err != nil {
			return nil, fmt.Errorf("gc --orphans: the metadata store must be verified sound before any fragment it does not name is deleted: %w", err)
		}
	}
	m, err := c.d.Maps.Map(ctx)
	if err != nil {
		return nil, err
	}
	if a.Orphans {
		if err := c.removeTempFiles(ctx, meta.RootIno, "/", a.Grace, rep); err != nil {
			return nil, err
		}
	}
	if err := c.drainQueue(ctx, m, rep); err != nil {
		return nil, err
	}
	if a.Orphans {
		if err := c.scanOrphans(ctx, m, a.Grace, rep); err != nil {
			return nil, err
		}
	}
	rep.DurationNanos = int64(c.d.Now().Sub(start))
	return rep, nil
}
