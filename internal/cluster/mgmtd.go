package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"sync"
	"time"

	"poolfs/internal/identity"
	"poolfs/internal/meta"
	"poolfs/internal/mgmt"
	"poolfs/internal/rpc"
	"poolfs/internal/storage"
)

// MgmtConfig is what `poolfs mgmt` starts: the management service of a
// cluster whose storage and metadata servers run on other machines.
type MgmtConfig struct {
	Dir    string // cluster directory made by Create (secret, id, name)
	DB     string // PostgreSQL connection string of the cluster's database
	Listen string // RPC address; the one in the join token
	// Intervals of the periodic jobs; zero values take the defaults of
	// Config (GC 5s, metadata check 10m, health 1s, rebuild 30s).
	GCInterval, MetaCheckInterval, HealthInterval, RebuildInterval time.Duration
	Logger                                                         *slog.Logger
	// ObserveRPC is as in Config (metrics).
	ObserveRPC func(method string, d time.Duration, err error)
	// OnLeadership, if set, is told when the service starts to lead (its
	// lease term) or stands by (the leader's address, "" if unknown).
	OnLeadership func(leading bool, term uint64, leader string)
	// CertLifetime is how long the certificates this service issues
	// (enrolment, renewal: renew.go) are valid; default certLifetime.
	CertLifetime time.Duration
}

// MgmtNode is a running management service.
type MgmtNode struct {
	Addr     string
	Mgmt     *mgmt.Service
	Registry *mgmt.Registry

	secret []byte // the cluster secret, as read at StartMgmt
	engine meta.Engine
	rpc    *rpc.Server
	dialer *storage.Dialer
	lock   *os.File // the directory's lock: one management service per directory
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

// Secret returns the cluster secret the service started with (see
// Cluster.Secret).
func (n *MgmtNode) Secret() []byte { return slices.Clone(n.secret) }

// StartMgmt starts the management service of the cluster in cfg.Dir over
// the database cfg.DB. Several may run at once: the one holding the
// database's lease leads, the others stand by (leader.go). The first
// leader stores an empty map; storage servers then register their drives
// (mgmt.Registry).
func StartMgmt(ctx context.Context, cfg MgmtConfig) (*MgmtNode, error) {
	defaults := Config{GCInterval: cfg.GCInterval, MetaCheckInterval: cfg.MetaCheckInterval,
		HealthInterval: cfg.HealthInterval, RebuildInterval: cfg.RebuildInterval, Logger: cfg.Logger}
	defaults.setDefaults()
	if cfg.DB == "" {
		return nil, errors.New("cluster: the management service needs the cluster's PostgreSQL database (--db)")
	}
	if cfg.CertLifetime < 0 {
		return nil, fmt.Errorf("cluster: certificate lifetime %v: want a positive duration", cfg.CertLifetime)
	}
	info, secret, err := ReadInfo(cfg.Dir)
	if err != nil {
		return nil, err
	}
	if err := EnsureIdentity(ctx, cfg.Dir, identity.RoleMgmt, "mgmt@"+cfg.Listen); err != nil {
		return nil, err
	}
	cr, err := loadCreds(cfg.Dir)
	if err != nil {
		return nil, err
	}
	log := defaults.Logger
	lock, err := lockDir(cfg.Dir)
	if err != nil {
		return nil, err
	}
	holder, err := mgmtHolder(cfg.Dir)
	if err != nil {
		lock.Close()
		return nil, err
	}
	n := &MgmtNode{lock: lock, secret: secret}
	n.engine, err = OpenEngine(ctx, cfg.Dir, cfg.DB, log)
	if err != nil {
		lock.Close()
		return nil, err
	}
	db, ok := n.engine.(leaseDB)
	if !ok {
		n.Close()
		return nil, fmt.Errorf("cluster: the management service needs a PostgreSQL database, not %s", n.engine.Dialect().Name)
	}
	store := meta.New(n.engine, meta.Options{Logger: log})
	rev := &revocations{}
	if cr.ca != nil {
		cr.revoked = rev.revoked // storage servers too are checked against the list
	}
	n.dialer = storage.NewDialer(secret, cr.client(rpc.ClientOptions{}, identity.RoleServer))
	n.Mgmt = mgmt.New(store, n.dialer, n.dialer, log)
	certs := newCertWatch(cmp.Or(cfg.CertLifetime, certLifetime)) // callers' certificates (status notes)
	if cr.ca != nil {
		n.Mgmt.StatusNotes = func() []string { return certs.notes(time.Now()) }
	}
	n.Registry = mgmt.NewRegistry(n.Mgmt)
	n.Mgmt.Follow("") // a standby until it holds the lease
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		n.Close()
		return nil, fmt.Errorf("cluster: listen: %w", err)
	}
	n.Addr = ln.Addr().String()
	gctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	if cr.ca != nil {
		rev.follow(gctx, &n.wg, n.Mgmt.Revoked, log)
	}
	opts := cr.server(rpc.ServerOptions{Logger: log, Errors: allErrors(), Observe: cfg.ObserveRPC})
	if cr.ca != nil {
		opts.AllowNoCert = true // nodes without a certificate may only enrol
		opts.Authorize = func(method string, peer *identity.Cert) error {
			certs.saw(peer, time.Now())
			return mgmtAuthorize(method, peer)
		}
	}
	n.rpc = rpc.NewServer(secret, opts)
	n.Mgmt.Register(n.Mgmt.Gate(n.rpc))
	n.Registry.Register(n.Mgmt.Gate(n.rpc))
	n.Mgmt.RegisterRevocation(n.Mgmt.Gate(n.rpc))
	if cr.ca != nil {
		enroll, renew := mgmtIssuer(cfg.Dir, cmp.Or(cfg.CertLifetime, certLifetime))
		n.Mgmt.Gate(n.rpc).Handle("mgmt.Enroll", enroll)
		n.Mgmt.Gate(n.rpc).Handle("mgmt.Renew", renew)
		keepRenewed(gctx, &n.wg, cfg.Dir, cr, func(ctx context.Context) ([]byte, error) {
			mc, mclose, err := dialMgmt(info, secret, cr) // the leader: this service or another
			if err != nil {
				return nil, err
			}
			defer mclose()
			return mc.Renew(ctx)
		}, log)
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		if err := n.rpc.Serve(ln); err != nil {
			log.Error("rpc server stopped", "err", err)
		}
	}()
	l := newLeader(db, n.Mgmt, holder, n.Addr, info.Name, log)
	l.changed = cfg.OnLeadership
	l.lead = func(ctx context.Context, wg *sync.WaitGroup) {
		mgmtLoops{svc: n.Mgmt, store: store, log: log, health: n.Mgmt.CheckDrives, gc: defaults.GCInterval, metaCheck: defaults.MetaCheckInterval,
			healthEvery: defaults.HealthInterval, rebuild: defaults.RebuildInterval}.start(ctx, wg)
	}
	l.step(gctx) // the first service of a cluster leads at once
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		l.run(gctx)
	}()
	return n, nil
}

// Close stops the service.
func (n *MgmtNode) Close() error {
	n.once.Do(func() {
		if n.Mgmt != nil {
			n.Mgmt.Stopping()
		}
		if n.cancel != nil {
			n.cancel()
		}
		if n.rpc != nil {
			n.rpc.Close()
		}
		n.wg.Wait()
		if n.dialer != nil {
			n.dialer.Close()
		}
		n.engine.Close()
		n.lock.Close()
	})
	return nil
}
