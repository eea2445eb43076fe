package mgmt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"poolfs/internal/client"
	"poolfs/internal/clustermap"
	"poolfs/internal/meta"
	"poolfs/internal/mgmt/detect"
	"poolfs/internal/mgmt/gc"
	"poolfs/internal/mgmt/rebuild"
	"poolfs/internal/mgmt/scrub"
	"poolfs/internal/rpc"
)

// mapBlob is the name of the cluster map in the metadata store.
const mapBlob = "clustermap"

// Service is the management service.
type Service struct {
	store   *meta.Store
	drives  client.Drives
	servers Servers // nil: no rebuild tasks, no fault injection
	log     *slog.Logger
	// OnMapChange, if set before the service is used, is called with each
	// new map after it is stored (an embedded cluster opens new drives).
	OnMapChange func(m *clustermap.Map) error
	// StatusNotes, if set before the service is used, adds its warnings
	// to Status.Notes (internal/cluster: certificates near their expiry).
	StatusNotes func() []string

	rb    *rebuild.Coordinator // the rebuild coordinator (rebuild.go)
	reqs  requests             // calls with request ids running (requests.go)
	sc    *scrub.Scheduler     // the scrub scheduler (scrub.go)
	gc    *gc.Collector        // the fragment collector (gc.go)
	space spaceWatch

	slow      *detect.Slow // the slow-drive judge (slow.go); its policy is set before use
	stopping  atomic.Bool  // the process is shutting down (Stopping)
	inProcess string       // the storage server in this process, if any (servers.go)
	io        ioState      // clients' I/O reports (iostats.go)

	al     alerting   // alerts.go
	clocks clockWatch // alerts_clock.go

	// lead is whether the service leads (leader.go); guarded by its lock.
	lead struct {
		sync.Mutex
		standby bool
		leader  string     // the leader's address, on a standby
		fence   meta.Fence // on the leader: the condition of its map writes
	}
	mu struct {
		sync.Mutex
		m       *clustermap.Map
		version uint64
	}
	// integ.bad is the failed integrity check that stopped fragment
	// deletion (integrity.go); nil while the store is believed sound.
	integ struct {
		sync.Mutex
		bad error
	}
}

// New returns the service over a metadata store (which holds the map);
// drives reaches the storage servers' drives as clients do, servers the
// servers themselves (nil for a service that only reads the map or checks
// drives: rebuild tasks and fault injection then fail with an error).
func New(store *meta.Store, drives client.Drives, servers Servers, log *slog.Logger) *Service {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Service{store: store, drives: drives, servers: servers, log: log, slow: detect.NewSlow(DefaultSlowPolicy())}
	s.rb = s.newCoordinator()
	s.gc = s.newCollector()
	s.sc = s.newScrubber()
	return s
}

// Load reads the stored map. It returns meta.ErrNotFound if there is none.
func (s *Service) Load(ctx context.Context) (*clustermap.Map, error) {
	b, v, err := s.store.GetBlob(ctx, mapBlob)
	if err != nil {
		return nil, err
	}
	var m clustermap.Map
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("mgmt: stored cluster map is corrupt: %w", err)
	}
	s.mu.Lock()
	s.mu.m, s.mu.version = &m, v
	s.mu.Unlock()
	return m.Clone(), nil
}

// Map returns a copy of the current map.
func (s *Service) Map(ctx context.Context) (*clustermap.Map, error) {
	s.mu.Lock()
	m := s.mu.m
	s.mu.Unlock()
	if m == nil {
		return s.Load(ctx)
	}
	return m.Clone(), nil
}

// Update applies fn to a copy of the current map and stores the result as
// the next epoch. fn may be called again if another writer won the race.
//
// Only the leader updates (leader.go): a standby gets ErrNotLeader, and a
// leader whose fence no longer passes gets the fence's error.
func (s *Service) Update(ctx context.Context, fn func(m *clustermap.Map) error) (*clustermap.Map, error) {
	fence, err := s.notLeader()
	if err != nil {
		return nil, err
	}
	for attempt := 0; attempt < 10; attempt++ {
		s.mu.Lock()
		cur, ver := s.mu.m, s.mu.version
		s.mu.Unlock()
		var next *clustermap.Map
		if cur == nil {
			next = &clustermap.Map{}
		} else {
			next = cur.Clone()
		}
		if err := fn(next); err != nil {
			return nil, err
		}
		next.Epoch++
		if err := next.RecordSpares(); err != nil {
			return nil, err
		}
		if err := next.Validate(); err != nil {
			return nil, err
		}
		b, err := json.Marshal(next)
		if err != nil {
			return nil, err
		}
		nv, err := s.store.PutBlobFenced(ctx, mapBlob, b, ver, fence)
		if err == nil {
			err = s.store.Sync(ctx) // a map epoch is never lost once announced
		}
		if errors.Is(err, meta.ErrConflict) {
			if _, err := s.Load(ctx); err != nil && !errors.Is(err, meta.ErrNotFound) {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		s.mu.m, s.mu.version = next, nv
		s.mu.Unlock()
		s.log.Info("cluster map updated", "epoch", next.Epoch)
		if s.OnMapChange != nil {
			if err := s.OnMapChange(next.Clone()); err != nil {
				return nil, fmt.Errorf("mgmt: apply map epoch %d: %w", next.Epoch, err)
			}
		}
		return next.Clone(), nil
	}
	return nil, fmt.Errorf("mgmt: cluster map update lost the race 10 times: %w", meta.ErrConflict)
}

// Register exposes the service on an RPC server.
func (s *Service) Register(r Handler) {
	s.registerPools(r)
	s.registerDrives(r)
	s.registerGrace(r)
	s.registerScrub(r)
	s.registerRepairs(r)
	s.registerIOStats(r)
	s.registerAlerts(r) // alerts_rpc.go
	s.registerDriveIO(r)
	s.registerStriping(r)
	r.Handle("mgmt.Rebuild", func(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
		st := s.Rebuild()
		return &rpc.Response{Result: st}, nil
	})
	r.Handle("mgmt.Map", func(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
		m, err := s.Map(ctx)
		if err != nil {
			return nil, err
		}
		return &rpc.Response{Result: m}, nil
	})
	r.Handle("mgmt.Status", func(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
		st, err := s.Status(ctx)
		if err != nil {
			return nil, err
		}
		return &rpc.Response{Result: st}, nil
	})
	r.Handle("mgmt.GC", func(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
		var a GCArgs
		if err := json.Unmarshal(req.Args, &a); err != nil {
			return nil, fmt.Errorf("%w: bad arguments: %v", meta.ErrInvalid, err)
		}
		rep, err := s.GC(ctx, a)
		if err != nil {
			return nil, err
		}
		return &rpc.Response{Result: rep}, nil
	})
}

// Client calls a management service.
type Client struct{ rc caller }

// caller is what a Client calls through: an *rpc.Client, or Leaders.
type caller interface {
	Call(ctx context.Context, method string, args any, body []byte, result any) error
}

// NewClient wraps an RPC client connected to the management service.
func NewClient(rc *rpc.Client) *Client { return &Client{rc: rc} }

// Map implements client.MapSource.
func (c *Client) Map(ctx context.Context) (*clustermap.Map, error) {
	var m clustermap.Map
	if err := c.rc.Call(ctx, "mgmt.Map", struct{}{}, nil, &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// Status returns the cluster status.
func (c *Client) Status(ctx context.Context) (*Status, error) {
	var st Status
	if err := c.rc.Call(ctx, "mgmt.Status", struct{}{}, nil, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// GC runs the collector once.
func (c *Client) GC(ctx context.Context, a GCArgs) (*GCReport, error) {
	var rep GCReport
	if err := c.rc.Call(ctx, "mgmt.GC", a, nil, &rep); err != nil {
		return nil, err
	}
	return &rep, nil
}

// Rebuild returns the rebuild coordinator's status.
func (c *Client) Rebuild(ctx context.Context) (*RebuildStatus, error) {
	var st RebuildStatus
	if err := c.rc.Call(ctx, "mgmt.Rebuild", struct{}{}, nil, &st); err != nil {
		return nil, err
	}
	return &st, nil
}
