package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"poolfs/internal/chunkstore"
	"poolfs/internal/identity"
	"poolfs/internal/mgmt"
	"poolfs/internal/placement"
	"poolfs/internal/rpc"
	"poolfs/internal/storage"
)

// StorageConfig is what `poolfs storage` starts: one storage server of a
// cluster, serving the drives of this machine.
type StorageConfig struct {
	Dir    string   // directory of this machine in the cluster (Join made it)
	Server string   // the server's name, unique in the cluster
	Drives []string // drive directories, made if missing
	// DriveSize is the capacity each drive advertises (0: the free space of
	// its file system shared among the drives on it).
	DriveSize int64
	Listen    string // RPC address
	// Advertise is the address other machines reach the server at
	// (default: the listening address, which must then not be 0.0.0.0).
	Advertise       string
	Rack, Enclosure string // failure-domain labels; "" for none
	Pool            string // pool that new drives join ("" is "default")
	DirectIO        *bool  // O_DIRECT on the drives (default true)
	// DriveModel, if set, emulates the speed of a drive model on every
	// drive of this server (chunkstore.ModelByName), scaled by SpeedScale
	// (0: 1), in place of the model the map gives the drive.
	DriveModel string
	SpeedScale float64
	// RegisterInterval is how often the server registers again (default
	// 2s): a new pool or a restarted management service learns it so.
	RegisterInterval time.Duration
	Logger           *slog.Logger
	// WrapDrive and ObserveRPC are as in Config (metrics).
	WrapDrive  func(id placement.DriveID, d chunkstore.Drive) chunkstore.Drive
	ObserveRPC func(method string, d time.Duration, err error)
}

// StorageNode is a running storage server.
type StorageNode struct {
	Addr string

	cfg     StorageConfig
	spec    mgmt.ServerSpec
	log     *slog.Logger
	local   map[string]*chunkstore.LocalDrive // by path
	server  *storage.Server
	rpc     *rpc.Server
	mclose  func() error // closes mc
	mc      *mgmt.Client
	dialer  *storage.Dialer
	served  map[placement.DriveID]bool // touched by the register loop only
	pending atomic.Int32               // drives waiting for a pool, at the last registration
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	once    sync.Once
}

// StartStorage opens the drives, serves them, and registers the server
// with the management service named in cfg.Dir; it returns once the first
// registration is answered (it tries for 30 s).
func StartStorage(ctx context.Context, cfg StorageConfig) (*StorageNode, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.RegisterInterval == 0 {
		cfg.RegisterInterval = 2 * time.Second
	}
	if cfg.Server == "" || len(cfg.Drives) == 0 {
		return nil, errors.New("cluster: a storage server needs a name (--server) and at least one drive (--drive)")
	}
	if cfg.DriveModel != "" {
		if _, err := chunkstore.ModelByName(cfg.DriveModel); err != nil {
			return nil, fmt.Errorf("cluster: drive model %q: want hdd-7200, hdd-10k, hdd-15k, ssd or none", cfg.DriveModel)
		}
	}
	if cfg.SpeedScale < 0 || cfg.SpeedScale > 1000 {
		return nil, fmt.Errorf("cluster: drive speed scale %g: want a factor > 0", cfg.SpeedScale)
	}
	info, secret, err := ReadInfo(cfg.Dir)
	if err != nil {
		return nil, err
	}
	cr, err := storageIdentity(ctx, cfg)
	if err != nil {
		return nil, err
	}
	n := &StorageNode{cfg: cfg, log: cfg.Logger, local: map[string]*chunkstore.LocalDrive{}, served: map[placement.DriveID]bool{}}
	n.spec = mgmt.ServerSpec{ID: cfg.Server, Rack: cfg.Rack, Enclosure: cfg.Enclosure, Pool: cfg.Pool}
	if err := n.openDrives(); err != nil {
		n.Close()
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		n.Close()
		return nil, fmt.Errorf("cluster: listen: %w", err)
	}
	n.Addr = ln.Addr().String()
	n.spec.Addr = cfg.Advertise
	if n.spec.Addr == "" {
		if ip := ln.Addr().(*net.TCPAddr).IP; ip.IsUnspecified() {
			ln.Close()
			n.Close()
			return nil, fmt.Errorf("cluster: listening on %s: give the address other machines reach this server at (--advertise)", n.Addr)
		}
		n.spec.Addr = n.Addr
	}
	n.server = storage.NewServer(nil, n.log)
	rev := &revocations{}
	if cr.ca != nil {
		cr.revoked = rev.revoked
	}
	opts := cr.server(rpc.ServerOptions{Logger: n.log, Errors: storage.Errors(), Observe: cfg.ObserveRPC})
	if cr.ca != nil {
		opts.Authorize = storageAuthorize
	}
	n.rpc = rpc.NewServer(secret, opts)
	n.server.Register(n.rpc)
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		if err := n.rpc.Serve(ln); err != nil {
			n.log.Error("rpc server stopped", "err", err)
		}
	}()
	n.dialer = storage.NewDialer(secret, cr.client(rpc.ClientOptions{}, identity.RoleServer))
	deadline := time.Now().Add(30 * time.Second)
	for {
		n.mc, n.mclose, err = dialMgmt(info, secret, cr)
		if err == nil {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			n.Close()
			return nil, fmt.Errorf("cluster: reach the management service at %s: %w", info.Mgmt, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	n.server.SetPeers(n.mc.Map, n.dialer)
	for {
		err = n.register(ctx)
		if err == nil {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil || !errors.Is(err, rpc.ErrUnavailable) {
			n.Close()
			return nil, fmt.Errorf("cluster: register with the management service at %s: %w", info.Mgmt, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	gctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	if cr.ca != nil {
		rev.follow(gctx, &n.wg, n.mc.Revoked, n.log)
		keepRenewed(gctx, &n.wg, cfg.Dir, cr, n.mc.Renew, n.log)
	}
	n.wg.Add(1)
	go n.registerLoop(gctx)
	return n, nil
}

// pendingInterval is how often a server registers while drives of it wait
// for a pool: they are served within this long of the pool's creation.
const pendingInterval = 200 * time.Millisecond

// registerLoop registers the server again every RegisterInterval (every
// pendingInterval while drives wait for a pool) until ctx ends.
func (n *StorageNode) registerLoop(ctx context.Context) {
	defer n.wg.Done()
	for {
		wait := n.cfg.RegisterInterval
		if n.Pending() > 0 {
			wait = pendingInterval
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		if err := n.register(ctx); err != nil && ctx.Err() == nil {
			n.log.Warn("register with the management service", "err", err)
		}
	}
}

// Pending returns how many drives waited for a pool at the last
// registration.
func (n *StorageNode) Pending() int { return int(n.pending.Load()) }

// openDrives opens (or makes) every drive directory.
func (n *StorageNode) openDrives() error {
	direct := n.cfg.DirectIO == nil || *n.cfg.DirectIO
	shares := map[uint64]int{} // drives per file system, by device
	devs := make([]uint64, len(n.cfg.Drives))
	for i, p := range n.cfg.Drives {
		abs, err := filepath.Abs(p)
		if err != nil {
			return err
		}
		n.cfg.Drives[i] = abs
		if err := makePrivateDir(abs); err != nil {
			return err
		}
		var st syscall.Stat_t
		if err := syscall.Stat(abs, &st); err != nil {
			return err
		}
		devs[i] = st.Dev
		shares[st.Dev]++
	}
	for i, p := range n.cfg.Drives {
		size := n.cfg.DriveSize
		if size == 0 {
			var fs syscall.Statfs_t
			if err := syscall.Statfs(p, &fs); err != nil {
				return err
			}
			size = int64(fs.Bavail) * int64(fs.Bsize) / int64(shares[devs[i]]) / (1 << 20) * (1 << 20)
		}
		ld, err := chunkstore.Open(p, chunkstore.Options{Capacity: size, DirectIO: direct, Logger: n.log})
		if err != nil {
			return fmt.Errorf("cluster: drive %s: %w", p, err)
		}
		n.local[p] = ld
		n.spec.Drives = append(n.spec.Drives, mgmt.DriveSpec{Path: p, Capacity: size})
	}
	return nil
}

// register registers the server and serves the drives the map gives it.
func (n *StorageNode) register(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	reg, err := n.mc.RegisterServer(ctx, n.spec)
	if err != nil {
		return err
	}
	m, err := n.mc.Map(ctx)
	if err != nil {
		return err
	}
	pending := 0
	for _, rd := range reg.Drives {
		if rd.Pending {
			pending++
			continue
		}
		if n.served[rd.ID] {
			continue
		}
		d, err := m.Drive(rd.ID)
		if err != nil {
			continue // a newer map than reg's is fetched next time
		}
		dd := *d
		if n.cfg.DriveModel != "" {
			dd.Model, dd.SpeedScale = n.cfg.DriveModel, n.cfg.SpeedScale
		}
		n.server.SetDrive(rd.ID, emulate(n.local[rd.Path], dd, n.cfg.WrapDrive))
		n.served[rd.ID] = true
		n.log.Info("serving drive", "drive", rd.ID.String(), "path", rd.Path)
	}
	n.pending.Store(int32(pending))
	return n.server.SetWriteLimits(m)
}

// Close stops serving and closes the drives.
func (n *StorageNode) Close() error {
	n.once.Do(func() {
		if n.cancel != nil {
			n.cancel()
		}
		if n.rpc != nil {
			n.rpc.Close()
		}
		n.wg.Wait()
		if n.mclose != nil {
			n.mclose()
		}
		if n.dialer != nil {
			n.dialer.Close()
		}
		for _, d := range n.local {
			d.Close()
		}
	})
	return nil
}

// storageIdentity enrols the storage server of cfg (role server, named by
// its server name) if it has no identity yet, waiting up to 30 s for the
// management service to answer, and returns its creds.
func storageIdentity(ctx context.Context, cfg StorageConfig) (creds, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := EnsureIdentity(ctx, cfg.Dir, identity.RoleServer, cfg.Server)
		if err == nil {
			return loadCreds(cfg.Dir)
		}
		if !errors.Is(err, rpc.ErrUnavailable) || time.Now().After(deadline) || ctx.Err() != nil {
			return creds{}, err
		}
		time.Sleep(200 * time.Millisecond)
	}
}
