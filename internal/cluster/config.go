package cluster

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"poolfs/internal/alerts"
	"poolfs/internal/chunkstore"
	"poolfs/internal/clustermap"
	"poolfs/internal/placement"
)

// NoPreservation in Config.Preservation reserves no rebuild capacity.
const NoPreservation = -1

// Config is what `poolfs up` starts. Pool settings apply when the cluster
// is created; a restart on the same directory keeps the stored map.
type Config struct {
	Dir string // cluster directory (default ./poolfs-data)
	// Meta is the metadata store: "" for embedded SQLite in Dir/meta.db, or
	// a postgres:// URL (shared by any number of metadata servers).
	Meta   string
	Listen string // RPC address (default 127.0.0.1:9401; port 0 picks one)

	Drives    int    // emulated drives (default 12)
	Scheme    string // "K+M" (default "8+2")
	Unit      uint32 // stripe unit bytes (default 1 MiB)
	DriveSize int64  // advertised bytes per drive (default: free space / drives)
	// Overcommit lets a new cluster's drives advertise more than the file
	// system holding Dir has free (refused otherwise); status warns when
	// they may take more than it has left.
	Overcommit bool
	// Preservation is the number of drives' worth of capacity kept free for
	// rebuilds: 0 picks clustermap.DefaultPreservation for the pool size,
	// NoPreservation keeps none.
	Preservation int
	// Domains spreads drives round robin over failure domains, e.g.
	// "server=4,enclosure=2": drive i is in server i%4, enclosure (i/4)%2.
	Domains string
	// DirectIO uses O_DIRECT on the drives (default true).
	DirectIO *bool
	// DriveFormat is the on-disk format of new drives (chunkstore.FormatFiles
	// or FormatSegments; "" means chunkstore.DefaultFormat). Existing drives
	// keep theirs.
	DriveFormat chunkstore.Format
	// GCInterval is how often the fragment collector runs (default 5s).
	GCInterval time.Duration
	// GCBacklogOff: the collector runs only every GCInterval (or when
	// asked), not also as soon as its queue holds a backlog (gcBacklog).
	GCBacklogOff bool
	// MetaCheckInterval is how often the metadata store's integrity is
	// checked while the cluster runs (default 10 minutes; the store is also
	// checked when opened). A failed check raises the event meta.corrupt
	// and stops all fragment deletion.
	MetaCheckInterval time.Duration
	// Layout of the pool created with the cluster: "declustered" (default)
	// or "grouped" (RAID-6 style groups; Preservation drives are hot spares).
	Layout string
	// DriveModel emulates drive speed (chunkstore.ModelByName: hdd-7200,
	// hdd-10k, hdd-15k, ssd, none), scaled by SpeedScale (0: 1). It is
	// stored in the map: a restart with DriveModel "" keeps the stored one.
	DriveModel string
	SpeedScale float64
	// HealthInterval is how often drives are checked for failure (default
	// 1s); RebuildInterval how often the coordinator rescans (default 30s).
	HealthInterval  time.Duration
	RebuildInterval time.Duration
	// SlowDownAfter: a drive flagged as far slower than its peers whose
	// probes take this long, several in a row, is marked down (0: the
	// default of mgmt.DefaultSlowPolicy). See mgmt.SlowPolicy.
	SlowDownAfter time.Duration
	// Alerts is the alert configuration; nil reads Dir/alerts.json (0600),
	// or takes alerts.DefaultConfig() if there is none.
	Alerts *alerts.Config
	Logger *slog.Logger
	// WrapDrive, if set, wraps every drive this server opens, under the
	// fault injection layer (metrics count the drive's I/O this way).
	WrapDrive func(id placement.DriveID, d chunkstore.Drive) chunkstore.Drive
	// ObserveRPC, if set, is the RPC server's rpc.ServerOptions.Observe.
	ObserveRPC func(method string, d time.Duration, err error)
}

func (c *Config) setDefaults() {
	if c.Dir == "" {
		c.Dir = "./poolfs-data"
	}
	if c.Listen == "" {
		c.Listen = "127.0.0.1:9401"
	}
	if c.Drives == 0 {
		c.Drives = 12
	}
	if c.Scheme == "" {
		c.Scheme = "8+2"
	}
	if c.Unit == 0 {
		c.Unit = 1 << 20
	}
	switch {
	case c.Preservation == 0:
		c.Preservation = clustermap.DefaultPreservation(c.Drives)
	case c.Preservation < 0:
		c.Preservation = 0
	}
	if c.GCInterval == 0 {
		c.GCInterval = 5 * time.Second
	}
	if c.MetaCheckInterval == 0 {
		c.MetaCheckInterval = 10 * time.Minute
	}
	if c.HealthInterval == 0 {
		c.HealthInterval = time.Second
	}
	if c.RebuildInterval == 0 {
		c.RebuildInterval = 30 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Validate rejects settings that cannot make a pool.
func (c *Config) Validate() error {
	k, m, err := ParseScheme(c.Scheme)
	if err != nil {
		return err
	}
	if c.Drives < k+m+1 {
		return fmt.Errorf("cluster: %d drives cannot hold a %d+%d pool: need at least %d (k+m+1)", c.Drives, k, m, k+m+1)
	}
	if c.Drives > 1000 {
		return fmt.Errorf("cluster: %d drives: at most 1000 emulated drives", c.Drives)
	}
	if c.Unit < 4096 || c.Unit%4096 != 0 || c.Unit > 16<<20 {
		return fmt.Errorf("cluster: stripe unit %d: must be a multiple of 4 KiB between 4 KiB and 16 MiB", c.Unit)
	}
	if c.Drives-c.Preservation < k+m {
		return fmt.Errorf("cluster: preservation of %d drives leaves %d drives, fewer than the stripe width %d",
			c.Preservation, c.Drives-c.Preservation, k+m)
	}
	if c.MetaCheckInterval < 0 {
		return fmt.Errorf("cluster: metadata check interval %v", c.MetaCheckInterval)
	}
	if c.DriveSize < 0 {
		return fmt.Errorf("cluster: drive size %d", c.DriveSize)
	}
	if c.Layout != "" {
		if _, err := placement.ParseLayout(c.Layout); err != nil {
			return fmt.Errorf("cluster: layout %q: want declustered or grouped", c.Layout)
		}
	}
	if c.DriveModel != "" {
		if _, err := chunkstore.ModelByName(c.DriveModel); err != nil {
			return fmt.Errorf("cluster: drive model %q: want hdd-7200, hdd-10k, hdd-15k, ssd or none", c.DriveModel)
		}
	}
	if c.DriveFormat != "" {
		if _, err := chunkstore.ParseFormat(string(c.DriveFormat)); err != nil {
			return fmt.Errorf("cluster: drive format %q: want files or segments", c.DriveFormat)
		}
	}
	if c.SpeedScale < 0 || c.SpeedScale > 1000 {
		return fmt.Errorf("cluster: drive speed scale %g: want a factor > 0", c.SpeedScale)
	}
	_, err = parseDomains(c.Domains)
	return err
}

// ParseScheme parses "K+M".
func ParseScheme(s string) (k, m int, err error) {
	a, b, ok := strings.Cut(s, "+")
	if ok {
		k, err = strconv.Atoi(a)
		if err == nil {
			m, err = strconv.Atoi(b)
		}
	}
	if !ok || err != nil || k < 1 || m < 0 || k+m > 64 {
		return 0, 0, fmt.Errorf("cluster: scheme %q: want K+M such as 8+2 (1 <= K, 0 <= M, K+M <= 64)", s)
	}
	return k, m, nil
}

type domainLevel struct {
	name string
	n    int
}

func parseDomains(s string) ([]domainLevel, error) {
	if s == "" {
		return nil, nil
	}
	var out []domainLevel
	for _, part := range strings.Split(s, ",") {
		name, v, ok := strings.Cut(part, "=")
		n, err := strconv.Atoi(v)
		if !ok || err != nil || n < 1 || name == "" {
			return nil, fmt.Errorf("cluster: failure domains %q: want e.g. server=4,enclosure=2", s)
		}
		out = append(out, domainLevel{name, n})
	}
	return out, nil
}

// domainOf returns drive i's failure-domain path.
func domainOf(levels []domainLevel, i int) []string {
	var out []string
	div := 1
	for _, l := range levels {
		out = append(out, fmt.Sprintf("%s%d", l.name, (i/div)%l.n))
		div *= l.n
	}
	return out
}
