package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"poolfs/internal/chunkstore"
	"poolfs/internal/clustermap"
	"poolfs/internal/meta"
	"poolfs/internal/placement"
	"poolfs/internal/stripeio"
)

// Errors returned by the client.
var (
	// ErrDataLoss: more fragments of a stripe are lost than parity covers.
	ErrDataLoss = errors.New("client: data loss")
	// ErrUnavailable: a stripe cannot be read now, but enough of its
	// fragments are on drives that are down (not failed): it reads again
	// once they answer, or once the rebuild after their grace restores it.
	ErrUnavailable = errors.New("client: data unavailable")
	// ErrPoolFull: the pool has no usable capacity left for the write.
	ErrPoolFull = errors.New("client: pool full")
	// ErrWouldBlock: TryReadAt or TryWriteAtFor would have had to wait.
	ErrWouldBlock = errors.New("client: would wait")
)

// Namespace is the part of the metadata service that names files.
type Namespace interface {
	Getattr(ctx context.Context, ino meta.Ino) (meta.Attr, error)
	Lookup(ctx context.Context, parent meta.Ino, name string) (meta.Attr, error)
	Create(ctx context.Context, parent meta.Ino, name string, typ meta.FileType, mode, uid, gid, rdev uint32, target string) (meta.Attr, error)
	Link(ctx context.Context, ino, newParent meta.Ino, newName string) (meta.Attr, error)
	Unlink(ctx context.Context, parent meta.Ino, name string) error
	Rmdir(ctx context.Context, parent meta.Ino, name string) error
	Rename(ctx context.Context, oldParent meta.Ino, oldName string, newParent meta.Ino, newName string, flags meta.RenameFlags) error
	Readdir(ctx context.Context, ino meta.Ino, after string, limit int) ([]meta.Dirent, error)
	Setattr(ctx context.Context, ino meta.Ino, in meta.SetAttr) (meta.Attr, error)
	SetLayout(ctx context.Context, ino meta.Ino, l meta.Layout) error
}

// Stripes is the part of the metadata service that maps stripes to
// generations and drives.
type Stripes interface {
	Stripes(ctx context.Context, ino meta.Ino, first, last uint64) ([]meta.StripeRec, error)
	// StripeHeads is Stripes with a summary of each record's extents
	// (StripeRec.Sum) in place of the extents (meta.Store.StripeHeads).
	StripeHeads(ctx context.Context, ino meta.Ino, first, last uint64) ([]meta.StripeRec, error)
	CommitStripes(ctx context.Context, ino meta.Ino, commits []meta.StripeCommit, newSize uint64, mtime int64) (meta.Attr, error)
	PoolUsage(ctx context.Context, pool uint32) (used, limit uint64, err error)
	// GCBytes returns the raw bytes per drive of the first limit items
	// of the collector's queue (meta.Store.GCBytes): what
	// Options.GarbageLimit is measured against.
	GCBytes(ctx context.Context, limit int) (map[uint32]int64, error)
	// DropStripes removes the committed stripes in [first, last] (a hole
	// punched in the file; see meta.Store.DropStripes).
	DropStripes(ctx context.Context, ino meta.Ino, first, last uint64) (meta.Attr, error)
	// CommitDeltas commits log stripes and their delta extents
	// (meta.Store.CommitDeltas); FoldStripes commits generations that
	// fold a stripe's extents in (meta.Store.FoldStripes).
	CommitDeltas(ctx context.Context, ino meta.Ino, logs []meta.LogCommit, mtime int64) (meta.Attr, error)
	FoldStripes(ctx context.Context, ino meta.Ino, commits []meta.StripeCommit) error
}

// Meta is everything the client needs from the metadata service.
type Meta interface {
	Namespace
	Stripes
	OpenFiles // namespace_ext.go
	Xattrs    // namespace_ext.go
}

// MapSource returns the current cluster map.
type MapSource interface {
	Map(ctx context.Context) (*clustermap.Map, error)
}

// Drives resolves a drive ID of a map to something that stores fragments.
type Drives interface {
	Drive(m *clustermap.Map, id placement.DriveID) (chunkstore.Drive, error)
}

// Options tune the data path.
type Options struct {
	// StripesInFlight bounds the stripes being written at once per file,
	// and those being read per sequential stream of a file (readahead fills
	// its window as stripes arrive, not all at once; default 8: 8 × (k+m)
	// fragments in flight). A File
	// writing back in the background may also borrow from a window of
	// (WriteBehindFactor-1) × StripesInFlight stripes shared by the whole
	// client, so that one sequential writer, or several writers of one
	// shared file, keep about as many stripes on the wire as writers of
	// separate files do.
	StripesInFlight int
	// ReadAhead is the most stripes a sequential reader of one File has
	// read ahead of it (default 16: 128 MiB of data at 8+2 with 1 MiB
	// units). The window starts at 4 stripes once a stream is seen and
	// doubles with every read that continues it, as the kernel's and
	// Lustre's readahead ramp up, so a short sequential read does not
	// pull in the whole window. Disks and virtual disks stream faster with
	// more reads in flight, so the window is deep. Each sequential stream
	// of a File (several readers of one shared file, streams.go) has its
	// own window; a File's stripe cache holds ReadAhead stripes per
	// established stream, up to ReadAheadTotal, plus StripesInFlight
	// (k+m fragment buffers each) while it is being read.
	ReadAhead int
	// ReadAheadTotal bounds the stripes that all Files of the client hold
	// because they were read ahead, until the cache lets them go (default
	// 8 × ReadAhead: about 1.3 GiB of buffers at 8+2 with 1 MiB units),
	// so that many files read at once do not each take a full window.
	// Beyond it readers fill only the stripes they ask for.
	ReadAheadTotal int
	// HedgeFloor and HedgeFactor set when a fragment read is late: after
	// max(HedgeFloor, HedgeFactor × the drives' typical high latency, or
	// × its own drive's if that is longer and the drive is not slow), and
	// twice as long as the slowest of its stripe's reads that arrived, the
	// reader fetches parity beside it and decodes from the first k
	// fragments, within a budget of hedged reads (stripeio.Fetch.Get,
	// stripeio.Latencies; defaults DefaultHedgeFloor and
	// DefaultHedgeFactor).
	HedgeFloor  time.Duration
	HedgeFactor float64
	// RepairsInFlight bounds the background read repairs running at once
	// (default DefaultRepairsInFlight).
	RepairsInFlight int
	// MapMaxAge is how old the client's cluster map may get before it is
	// fetched again (default DefaultMapMaxAge), so that drives marked down
	// or slow reach long-running writers and readers that meet no error.
	MapMaxAge time.Duration
	// SyncDelay bounds how long fragments and commits of closed files wait
	// for a sync when nobody fsyncs: that long after the first write no
	// Sync covered, the client runs one in the background (sync.go), as a
	// journalling file system commits every few seconds. Default
	// DefaultSyncDelay; negative: only fsync and friends sync.
	SyncDelay time.Duration
	Logger    *slog.Logger
	// NoDeltas turns the delta log off: a write back of a stripe written
	// in part rewrites the whole stripe (read-modify-write), as before
	// delta extents existed (delta.go).
	NoDeltas bool
	// DeltaBudget is the most bytes one File's delta log keeps (its log
	// stripes, the bytes of extents since folded or overwritten
	// included, as long as one extent keeps a log stripe): beyond it the
	// background fold writes the stripes with extents in the oldest log
	// stripes as new generations, and beyond 9/8 of it (the log stripes
	// of write-backs in flight included) a writer waits for the folds
	// (fold.go); 0: DefaultDeltaBudget or 9/16 of the file's size,
	// whichever is larger. Either way it is at most half the room the
	// log and the pool's free space make together.
	DeltaBudget int64
	// FoldsInFlight bounds the stripes the client folds at once (default
	// DefaultFoldsInFlight).
	FoldsInFlight int
	// LogCache bounds the bytes of the log stripes it wrote that the
	// client keeps in memory for the folds and reads of their extents
	// (logcache.go); 0: DefaultLogCache(); negative: none.
	LogCache int64
	// GarbageLimit: a write over a committed stripe generation (a fold, a
	// rewrite) waits while the collector's queue holds more raw bytes
	// than this on up drives and the collector is shrinking it
	// (garbage.go); 0: DefaultGarbageLimit; negative: no limit.
	GarbageLimit int64
	// OnRepair, if set, is called for each fragment a read found damaged
	// or missing and rewrote on drive id (read repair), so that the
	// repairs are counted where operators look (mgmt.RepairBatcher).
	OnRepair func(id placement.DriveID)
	// UnreachableAfter is how long a server may make no progress on the
	// fragment writes pending to its drives (none completes) before the
	// client takes it for unreachable from here, places the stripe again
	// around it and
	// avoids the server for AvoidFor (unreachable.go; defaults
	// DefaultUnreachableAfter and DefaultAvoidFor).
	UnreachableAfter time.Duration
	AvoidFor         time.Duration
	// OnUnreachable, if set, is called with a drive whose server the
	// client found unreachable, so that the management service probes it
	// (mgmt.Client.DriveUnreachable). It must not block.
	OnUnreachable func(id placement.DriveID)
}

// Defaults of the hedging bound (Options.HedgeFloor, Options.HedgeFactor).
const (
	DefaultHedgeFloor  = 5 * time.Millisecond
	DefaultHedgeFactor = 2.0
)

// DefaultMapMaxAge is Options.MapMaxAge's default.
const DefaultMapMaxAge = 2 * time.Second

// DefaultSyncDelay is Options.SyncDelay's default (ext4 commits its
// journal every 5 s).
const DefaultSyncDelay = 5 * time.Second

// mapRefreshTimeout bounds the fetch of a map that is only old: the caller
// goes on with the old map rather than wait for the management service.
const mapRefreshTimeout = 5 * time.Second

// WriteBehindFactor × Options.StripesInFlight is the number of stripes one
// File may write back in the background at once, its own window and the
// client's shared one together.
const WriteBehindFactor = 4

// Client is the data path. It is safe for concurrent use.
type Client struct {
	logs    *logCache // nil: none
	meta    Meta
	maps    MapSource
	drives  Drives
	opts    Options
	log     *slog.Logger
	headers *headerCache
	bufs    pools // fragment buffers per geometry
	// byteBufs holds byte buffers by size class: the bytes of small
	// writes (dirtyStripe) and what ranged reads of fragments read
	// (readParts, readDeltas), handed back once copied out. A new zeroed
	// buffer for each ranged read showed in the CPU profile of random
	// 4 KiB writes, whose folds read each extent's block.
	byteBufs chunkstore.Buffers
	// writeBehind is the shared write-behind window: a token per stripe a
	// File writes back in the background beyond its own window
	// (file_async.go).
	writeBehind chan struct{}
	// ahead is the read-ahead budget: a token per stripe read ahead whose
	// buffers are still held (Options.ReadAheadTotal).
	ahead chan struct{}

	small    smallFiles   // when writes last fetched the map (smallfile.go)
	unsynced unsynced     // drives with deferred writes no Sync covered (sync.go)
	space    *spaceGate   // admission of buffered writes (space.go)
	garbage  *garbageGate // writes over committed generations wait for the collector (garbage.go)
	// heldGarbage and heldFolds count the waits of writers held back by
	// the garbage gate and by the folds (Held, held.go).
	heldGarbage, heldFolds heldCounter
	// fullStuck: a replacement refused by a full drive waited in vain
	// (full_retry.go).
	fullStuck atomic.Bool

	refresh sync.Mutex          // held by the caller of Map fetching an old map again
	lat     *stripeio.Latencies // fragment-read latency per drive, for hedging
	repairs chan struct{}       // a token per background read repair (read_repair.go)
	codecs  stripeio.Codecs
	folds   chan struct{} // a token per stripe being folded (fold.go)
	// bg is the context of the client's own background work (folds, read
	// repairs), bgRun counts it (startBg); Close cancels and waits for it.
	bg      context.Context
	stopBg  context.CancelFunc
	bgRun   sync.WaitGroup
	bgMu    sync.Mutex    // orders startBg's Add before Close's Wait
	unreach *unreachables // write progress per drive, servers avoided (unreachable.go)
	// foldWritten, if set (tests), runs when a fold's fragments are
	// written, before its commit; false stops the fold there, as a crash
	// would (no commit, no cleanup).
	foldWritten func(rec meta.StripeRec) bool
	// logWritten, if set (tests), runs when a write-back's log stripes
	// are written, before their commit; false stops it there as a crash
	// would (no commit, no cleanup).
	logWritten func(logs []meta.LogCommit) bool

	mu struct {
		sync.Mutex
		m       *clustermap.Map
		fetched time.Time // when m was last fetched
		pgmaps  map[uint32]*placement.PGMap
		avoidPG map[uint32]avoidPG  // placement around avoided servers (unreachable.go)
		orders  map[uint32]*orderOf // stripe → PG order of a pool's map (stripe_order.go)
	}
}

// New returns a client.
func New(m Meta, maps MapSource, drives Drives, opts Options) *Client {
	if opts.StripesInFlight <= 0 {
		opts.StripesInFlight = 8
	}
	if opts.ReadAhead <= 0 {
		opts.ReadAhead = 16
	}
	if opts.ReadAheadTotal <= 0 {
		opts.ReadAheadTotal = 8 * opts.ReadAhead
	}
	if opts.HedgeFloor <= 0 {
		opts.HedgeFloor = DefaultHedgeFloor
	}
	if opts.HedgeFactor <= 0 {
		opts.HedgeFactor = DefaultHedgeFactor
	}
	if opts.SyncDelay == 0 {
		opts.SyncDelay = DefaultSyncDelay
	}
	if opts.MapMaxAge <= 0 {
		opts.MapMaxAge = DefaultMapMaxAge
	}
	if opts.RepairsInFlight <= 0 {
		opts.RepairsInFlight = DefaultRepairsInFlight
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.LogCache == 0 {
		opts.LogCache = DefaultLogCache()
	}
	if opts.GarbageLimit == 0 {
		opts.GarbageLimit = DefaultGarbageLimit
	}
	if opts.FoldsInFlight <= 0 {
		opts.FoldsInFlight = DefaultFoldsInFlight
	}
	if opts.UnreachableAfter <= 0 {
		opts.UnreachableAfter = DefaultUnreachableAfter
	}
	if opts.AvoidFor <= 0 {
		opts.AvoidFor = DefaultAvoidFor
	}
	c := &Client{meta: m, maps: maps, drives: drives, opts: opts, log: opts.Logger, headers: newHeaderCache(8192),
		writeBehind: make(chan struct{}, (WriteBehindFactor-1)*opts.StripesInFlight),
		ahead:       make(chan struct{}, opts.ReadAheadTotal),
		lat:         stripeio.NewLatencies(opts.HedgeFloor, opts.HedgeFactor),
		repairs:     make(chan struct{}, opts.RepairsInFlight),
		folds:       make(chan struct{}, opts.FoldsInFlight),
		unreach:     newUnreachables()}
	c.mu.avoidPG = map[uint32]avoidPG{}
	c.mu.orders = map[uint32]*orderOf{}
	c.bg, c.stopBg = context.WithCancel(context.Background())
	c.garbage = newGarbageGate(m, c.Map, opts.GarbageLimit, &c.heldGarbage)
	c.space = newSpaceGate(m, c.garbage.drain)
	if opts.LogCache > 0 {
		c.logs = newLogCache(opts.LogCache)
	}
	return c
}

// Close stops the client's own background work, the folds of delta
// extents and read repairs, and waits for it to end; call it once the
// client's files are flushed, before closing the drives and the metadata
// store under it. A fold stopped half-way leaves the extents in force and
// its fragments to the collector, as a crash would. (Without it, folds
// running when the drives closed reported their stripes lost, and read
// repairs wrote to closed drives.)
func (c *Client) Close() {
	c.bgMu.Lock()
	c.stopBg()
	c.bgMu.Unlock()
	c.bgRun.Wait()
}

// startBg counts one more piece of background work, which calls
// c.bgRun.Done when it ends; false (nothing counted) once Close was called.
func (c *Client) startBg() bool {
	c.bgMu.Lock()
	defer c.bgMu.Unlock()
	if c.bg.Err() != nil {
		return false
	}
	c.bgRun.Add(1)
	return true
}

// aheadDone gives back a read-ahead stripe's token.
func (c *Client) aheadDone() { <-c.ahead }

// ReadAheadHeld is how many stripes of the read-ahead budget
// (Options.ReadAheadTotal) the client's Files hold now.
func (c *Client) ReadAheadHeld() int { return len(c.ahead) }

// Meta returns the metadata service the client uses.
func (c *Client) Meta() Meta { return c.meta }

// Map returns the current cluster map, fetching it on first use. A map
// older than Options.MapMaxAge is fetched again, by one caller while the
// others wait for it (at most mapRefreshTimeout); if that fetch fails the
// old map stays in use until MapMaxAge has passed again.
func (c *Client) Map(ctx context.Context) (*clustermap.Map, error) {
	c.mu.Lock()
	m, stale := c.mu.m, time.Since(c.mu.fetched) > c.opts.MapMaxAge
	c.mu.Unlock()
	if m == nil {
		return c.RefreshMap(ctx)
	}
	if !stale {
		return m, nil
	}
	c.refresh.Lock()
	defer c.refresh.Unlock()
	c.mu.Lock()
	m, stale = c.mu.m, time.Since(c.mu.fetched) > c.opts.MapMaxAge
	c.mu.Unlock()
	if !stale { // another caller just fetched it
		return m, nil
	}
	rctx, cancel := context.WithTimeout(ctx, mapRefreshTimeout)
	defer cancel()
	fresh, err := c.RefreshMap(rctx)
	if err == nil {
		return fresh, nil
	}
	c.log.Warn("cluster map refresh failed: going on with the old one", "epoch", m.Epoch, "err", err)
	c.mu.Lock()
	c.mu.fetched = time.Now() // try again after MapMaxAge
	c.mu.Unlock()
	return m, nil
}

// RefreshMap fetches the map again (after a drive error, say).
func (c *Client) RefreshMap(ctx context.Context) (*clustermap.Map, error) {
	m, err := c.maps.Map(ctx)
	if err != nil {
		return nil, fmt.Errorf("client: fetch cluster map: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.fetched = time.Now()
	if c.mu.m == nil || m.Epoch != c.mu.m.Epoch {
		c.mu.m = m
		c.mu.pgmaps = map[uint32]*placement.PGMap{}
	}
	return c.mu.m, nil
}

// pgMap returns the PG → drives table of a pool at the current epoch.
func (c *Client) pgMap(ctx context.Context, pool uint32) (*clustermap.Map, *placement.PGMap, error) {
	m, err := c.Map(ctx)
	if err != nil {
		return nil, nil, err
	}
	c.mu.Lock()
	pm := c.mu.pgmaps[pool]
	c.mu.Unlock()
	if pm != nil {
		return m, pm, nil
	}
	pp, err := m.Placement(pool)
	if err != nil {
		return nil, nil, err
	}
	pm, err = pp.Map()
	if err != nil {
		return nil, nil, fmt.Errorf("client: placement of pool %d: %w", pool, err)
	}
	c.mu.Lock()
	if c.mu.m == m {
		c.mu.pgmaps[pool] = pm
	}
	c.mu.Unlock()
	return m, pm, nil
}

// StripeBytes is the number of user bytes a full stripe of a layout holds.
func StripeBytes(l meta.Layout) int64 { return int64(l.K) * int64(l.Unit) }

// syncMeta makes the metadata changes committed so far durable, when the
// metadata service defers durability (an optional capability).
func (c *Client) syncMeta(ctx context.Context) error {
	if s, ok := c.meta.(interface{ Sync(context.Context) error }); ok {
		return s.Sync(ctx)
	}
	return nil
}
