package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"poolfs/internal/chunkstore"
	"poolfs/internal/clustermap"
	"poolfs/internal/meta"
	"poolfs/internal/meta/postgres"
	"poolfs/internal/meta/sqlite"
	"poolfs/internal/metarpc"
	"poolfs/internal/mgmt"
	"poolfs/internal/placement"
	"poolfs/internal/rpc"
	"poolfs/internal/storage"
)

// serverID is the one storage server of an embedded cluster.
const serverID = "s0"

// Cluster is a running one-machine cluster.
type Cluster struct {
	Config Config
	Addr   string // RPC address of every service
	Mgmt   *mgmt.Service
	Store  *meta.Store

	log     *slog.Logger
	secret  []byte // the cluster secret, as read at Start
	lock    *os.File
	engine  meta.Engine
	rpc     *rpc.Server
	dialer  *storage.Dialer
	storage *storage.Server
	mu      sync.Mutex // guards local
	local   []*chunkstore.LocalDrive
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	closeMu sync.Once
}

// Secret returns the cluster secret the services started with. Clients in
// this process (the dashboard, an in-process mount) use it rather than the
// file: the file may have changed since, and then the services still
// serve the secret they read.
func (c *Cluster) Secret() []byte { return slices.Clone(c.secret) }

// Start starts (or resumes) the cluster in cfg.Dir.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := makePrivateDir(cfg.Dir); err != nil {
		return nil, err
	}
	if err := tightenDir(cfg.Dir, cfg.Logger); err != nil {
		return nil, err
	}
	lock, err := lockDir(cfg.Dir)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Config: cfg, log: cfg.Logger, lock: lock}
	if err := c.start(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// sqliteLinger is how long the embedded SQLite engine keeps a write
// transaction open for the updates that follow (sqlite.Options.Linger):
// a create or unlink then costs its statements, not a COMMIT. A killed
// `poolfs up` loses at most this much of the metadata changes no fsync
// covered, which POSIX allows (a machine crash loses all of them).
const sqliteLinger = 10 * time.Millisecond

// OpenEngine opens the metadata engine of the cluster whose directory is
// dir: SQLite in dir/meta.db when dsn is empty, else the PostgreSQL
// database of dsn (postgres.Open), which must be new or belong to this
// cluster (the id in dir/cluster-id). No error it returns shows a password.
func OpenEngine(ctx context.Context, dir, dsn string, log *slog.Logger) (meta.Engine, error) {
	if dsn == "" {
		// Deferred durability: a commit is durable at the next Sync, which
		// fsync, close after writes, put, map changes and the collector
		// call (see meta.Store.Sync); commits linger (sqliteLinger).
		eng, err := sqlite.OpenWith(filepath.Join(dir, "meta.db"), sqlite.Options{Deferred: true, Linger: sqliteLinger})
		if err != nil {
			return nil, fmt.Errorf("cluster: open metadata store: %w", err)
		}
		return eng, nil
	}
	if !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://") && !strings.Contains(dsn, "=") {
		return nil, fmt.Errorf("cluster: metadata store %q: want a postgres:// URL or keyword=value connection string (or nothing for SQLite)",
			postgres.Redact(dsn))
	}
	id, err := ReadID(dir)
	if err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	me := postgres.Owner{ID: id, Where: host + ":" + mustAbs(dir)}
	eng, err := postgres.Open(ctx, dsn, me)
	var oe *postgres.OwnerError
	if errors.As(err, &oe) {
		return nil, fmt.Errorf("cluster: PostgreSQL database %s: %w.\n"+
			"Two clusters on one database would each take the other's files for lost data: give this cluster a database of its own; "+
			"or, if %s is the directory of cluster %s and lost its %s file, write %s into %s",
			postgres.Redact(dsn), oe, mustAbs(dir), oe.Owner.ID, idFile, oe.Owner.ID, filepath.Join(mustAbs(dir), idFile))
	}
	if err != nil {
		return nil, fmt.Errorf("cluster: open PostgreSQL metadata store %s: %w", postgres.Redact(dsn), err)
	}
	switch bound, adopted := eng.Bound(); {
	case adopted:
		log.Warn("metadata database in use from before cluster ids: bound it to this cluster; another cluster directory using it will be refused",
			"db", postgres.Redact(dsn), "cluster", id)
	case bound:
		log.Info("metadata database bound to this cluster", "db", postgres.Redact(dsn), "cluster", id)
	}
	return eng, nil
}

func (c *Cluster) start(ctx context.Context) error {
	cfg := c.Config
	secret, err := loadOrCreateSecret(cfg.Dir)
	if err != nil {
		return err
	}
	c.secret = secret
	if _, err := loadOrCreateID(cfg.Dir); err != nil {
		return err
	}
	eng, err := OpenEngine(ctx, cfg.Dir, cfg.Meta, c.log)
	if err != nil {
		return err
	}
	c.engine = eng
	c.Store = meta.New(eng, meta.Options{Logger: c.log})
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("cluster: listen: %w", err)
	}
	c.Addr = ln.Addr().String()
	c.dialer = storage.NewDialer(secret, rpc.ClientOptions{})
	c.Mgmt = mgmt.New(c.Store, c.dialer, c.dialer, c.log)
	c.Mgmt.SetInProcessServer(serverID)
	if cfg.SlowDownAfter != 0 {
		sp := mgmt.DefaultSlowPolicy()
		sp.DownAfter = cfg.SlowDownAfter
		if err := c.Mgmt.SetSlowPolicy(sp); err != nil {
			ln.Close()
			return fmt.Errorf("cluster: %w", err)
		}
	}
	m, err := c.loadOrCreateMap(ctx)
	if err != nil {
		ln.Close()
		return err
	}
	for _, p := range m.Pools {
		capa, err := m.PoolCapacity(p.ID)
		if err != nil {
			ln.Close()
			return err
		}
		if err := c.Store.SetPoolLimit(ctx, p.ID, uint64(capa.UsableRaw)); err != nil {
			ln.Close()
			return err
		}
	}
	p := m.Pools[0]
	if err := c.Store.Init(ctx, meta.Layout{Pool: p.ID, K: p.K, M: p.M, Unit: p.Unit}); err != nil {
		ln.Close()
		return err
	}
	drives, err := c.openDrives(m)
	if err != nil {
		ln.Close()
		return err
	}
	errs := rpc.NewErrorTable(append(storage.ErrorCodes(), metarpc.ErrorCodes()...)...)
	c.rpc = rpc.NewServer(secret, rpc.ServerOptions{Logger: c.log, Errors: errs, Observe: cfg.ObserveRPC})
	c.storage = storage.NewServer(drives, c.log)
	c.storage.SetPeers(c.Mgmt.Map, c.dialer)
	if err := c.storage.SetWriteLimits(m); err != nil {
		ln.Close()
		return err
	}
	c.storage.Register(c.rpc)
	c.Mgmt.OnMapChange = c.applyMap
	gctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	if err := c.startAlerts(ctx, gctx, m.Name); err != nil { // alerts.go
		ln.Close()
		return err
	}
	metarpc.Register(c.rpc, c.Store)
	c.Mgmt.Register(c.rpc)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		if err := c.rpc.Serve(ln); err != nil {
			c.log.Error("rpc server stopped", "err", err)
		}
	}()
	if err := writeInfo(cfg.Dir, Info{Name: m.Name, Mgmt: c.Addr, Meta: c.Addr, PID: os.Getpid()}); err != nil {
		return err
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.Store.ReapSessions(gctx, c.Config.GCInterval)
	}()
	mgmtLoops{svc: c.Mgmt, store: c.Store, log: c.log, health: c.checkHealth, gc: cfg.GCInterval, gcBacklogOff: cfg.GCBacklogOff, metaCheck: cfg.MetaCheckInterval,
		healthEvery: cfg.HealthInterval, rebuild: cfg.RebuildInterval}.start(gctx, &c.wg)
	return nil
}

// loadOrCreateMap returns the stored map, updated to this process's
// address, or creates the map of a new cluster.
func (c *Cluster) loadOrCreateMap(ctx context.Context) (*clustermap.Map, error) {
	_, err := c.Mgmt.Load(ctx)
	if err != nil && !errors.Is(err, meta.ErrNotFound) {
		return nil, err
	}
	if err == nil {
		return c.Mgmt.Update(ctx, func(m *clustermap.Map) error {
			if c.Config.DriveModel != "" {
				for i := range m.Drives {
					m.Drives[i].Model, m.Drives[i].SpeedScale = c.Config.DriveModel, c.Config.SpeedScale
				}
			}
			m.Meta = []string{c.Addr}
			for i := range m.Servers {
				if m.Servers[i].ID == serverID {
					m.Servers[i].Addr = c.Addr
				}
			}
			return nil
		})
	}
	cfg := c.Config
	k, mm, _ := ParseScheme(cfg.Scheme)
	size := cfg.DriveSize
	var st syscall.Statfs_t
	if err := syscall.Statfs(cfg.Dir, &st); err != nil {
		return nil, err
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	if size == 0 {
		size = free / int64(cfg.Drives) / (1 << 30) * (1 << 30)
		if size <= 0 {
			return nil, fmt.Errorf("cluster: not enough free space in %s for %d drives", cfg.Dir, cfg.Drives)
		}
	} else if need := size * int64(cfg.Drives); need > free && !cfg.Overcommit {
		gib := func(n int64) float64 { return float64(n) / (1 << 30) }
		return nil, fmt.Errorf("cluster: %d drives of %.1f GiB advertise %.1f GiB, the file system holding %s has %.1f GiB free: "+
			"use smaller drives, or overcommit (`poolfs up --force`) if the data will stay small",
			cfg.Drives, gib(size), gib(need), cfg.Dir, gib(free))
	}
	levels, _ := parseDomains(cfg.Domains)
	layout := placement.Declustered
	if cfg.Layout != "" {
		layout, _ = placement.ParseLayout(cfg.Layout)
	}
	return c.Mgmt.Update(ctx, func(m *clustermap.Map) error {
		m.Name = filepath.Base(mustAbs(cfg.Dir))
		m.Meta = []string{c.Addr}
		m.Servers = []clustermap.Server{{ID: serverID, Addr: c.Addr}}
		pool := clustermap.Pool{ID: 0, Name: "default", K: k, M: mm, Unit: cfg.Unit,
			PGs: placement.DefaultPGs(cfg.Drives, k+mm), Layout: layout, Preservation: cfg.Preservation}
		for i := 0; i < cfg.Drives; i++ {
			id := placement.DriveID(i)
			m.Drives = append(m.Drives, clustermap.Drive{ID: id, Server: serverID,
				Path: filepath.Join("drives", id.String()), Capacity: size, Domain: domainOf(levels, i),
				State: clustermap.StateUp, Pool: 0, Model: cfg.DriveModel, SpeedScale: cfg.SpeedScale})
			pool.Drives = append(pool.Drives, id)
		}
		m.Pools = []clustermap.Pool{pool}
		return nil
	})
}

func mustAbs(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	return a
}

// openDrives opens this server's drives, in parallel (opening checks and
// recovers each drive).
func (c *Cluster) openDrives(m *clustermap.Map) (map[placement.DriveID]chunkstore.Drive, error) {
	direct := c.Config.DirectIO == nil || *c.Config.DirectIO
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs []error
	)
	out := map[placement.DriveID]chunkstore.Drive{}
	for _, d := range m.Drives {
		if d.Server != serverID || d.State == clustermap.StateOut {
			continue
		}
		p := d.Path
		if !filepath.IsAbs(p) {
			p = filepath.Join(c.Config.Dir, p)
		}
		wg.Add(1)
		go func(d clustermap.Drive) {
			defer wg.Done()
			ld, err := chunkstore.Open(p, chunkstore.Options{Capacity: d.Capacity, DirectIO: direct,
				Format: c.Config.DriveFormat, Logger: c.log})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("cluster: drive %v: %w", d.ID, err))
				return
			}
			out[d.ID] = emulate(ld, d, c.Config.WrapDrive)
			c.mu.Lock()
			c.local = append(c.local, ld)
			c.mu.Unlock()
		}(d)
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// applyMap opens the drives that a new map gives this server and applies
// the map's client write limits.
func (c *Cluster) applyMap(m *clustermap.Map) error {
	if err := c.storage.SetWriteLimits(m); err != nil {
		return err
	}
	served := map[placement.DriveID]bool{}
	for _, id := range c.storage.DriveIDs() {
		served[id] = true
	}
	next := m.Clone()
	next.Drives = nil
	for _, d := range m.Drives {
		if d.Server == serverID && !served[d.ID] && d.State != clustermap.StateOut {
			next.Drives = append(next.Drives, d)
		}
	}
	drives, err := c.openDrives(next)
	for id, d := range drives {
		c.storage.SetDrive(id, d)
	}
	return err
}

// Close stops every service; committed data is durable already.
func (c *Cluster) Close() error {
	c.closeMu.Do(func() {
		if c.Mgmt != nil {
			c.Mgmt.Stopping()
		}
		if c.cancel != nil {
			c.cancel()
		}
		if c.rpc != nil {
			c.rpc.Close()
		}
		c.wg.Wait()
		if c.dialer != nil {
			c.dialer.Close()
		}
		c.mu.Lock()
		for _, d := range c.local {
			d.Close()
		}
		c.mu.Unlock()
		if c.engine != nil {
			c.engine.Close()
		}
		if c.lock != nil {
			c.lock.Close()
		}
	})
	return nil
}
