package mgmt

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"poolfs/internal/clustermap"
	"poolfs/internal/meta"
	"poolfs/internal/placement"
	"poolfs/internal/rpc"
)

// Events of storage servers and metadata servers joining.
const (
	EventServerJoined = "server.joined"
	EventMetaJoined   = "meta.joined"
)

// ServerSpec is what a storage server registers: its name, the address it
// serves on, its failure-domain labels and its drives.
type ServerSpec struct {
	ID        string      `json:"id"`
	Addr      string      `json:"addr"`
	Rack      string      `json:"rack,omitempty"`
	Enclosure string      `json:"enclosure,omitempty"`
	Pool      string      `json:"pool,omitempty"` // pool new drives join; "" is "default"
	Drives    []DriveSpec `json:"drives"`
}

// DriveSpec is one drive a storage server offers.
type DriveSpec struct {
	Path     string `json:"path"`     // absolute directory on the server
	Capacity int64  `json:"capacity"` // advertised bytes
}

// Validate rejects a spec that cannot be placed in the map.
func (s ServerSpec) Validate() error {
	switch {
	case s.ID == "" || len(s.ID) > 64:
		return fmt.Errorf("%w: server name %q: 1 to 64 characters", meta.ErrInvalid, s.ID)
	case len(s.Drives) == 0 || len(s.Drives) > 1000:
		return fmt.Errorf("%w: server %s offers %d drives", meta.ErrInvalid, s.ID, len(s.Drives))
	}
	if _, _, err := net.SplitHostPort(s.Addr); err != nil {
		return fmt.Errorf("%w: server %s address %q: %v", meta.ErrInvalid, s.ID, s.Addr, err)
	}
	seen := map[string]bool{}
	for _, d := range s.Drives {
		if !filepath.IsAbs(d.Path) || seen[d.Path] {
			return fmt.Errorf("%w: server %s drive path %q: want distinct absolute paths", meta.ErrInvalid, s.ID, d.Path)
		}
		seen[d.Path] = true
		if d.Capacity < 1<<20 {
			return fmt.Errorf("%w: server %s drive %s: capacity %d, at least 1 MiB", meta.ErrInvalid, s.ID, d.Path, d.Capacity)
		}
	}
	return nil
}

// domain is the failure-domain path of the server's drives, top first:
// rack, enclosure, server. An unlabelled level is "" for every server, so
// placement does not enforce it (placement/domains.go).
func (s ServerSpec) domain() []string { return []string{s.Rack, s.Enclosure, s.ID} }

// Registered is the answer to a registration: the map's ID of each drive,
// in the order of ServerSpec.Drives; Pending drives wait for a pool
// (Registry.CreatePool) and are served once the server registers again.
type Registered struct {
	Epoch  uint64            `json:"epoch"`
	Drives []RegisteredDrive `json:"drives"`
}

// RegisteredDrive is one drive of Registered.
type RegisteredDrive struct {
	Path    string            `json:"path"`
	ID      placement.DriveID `json:"id"`
	Pending bool              `json:"pending,omitempty"`
}

// Registry admits storage servers and metadata servers into the map of a
// service whose servers run on several machines. Storage servers register
// when they start and again every few seconds; drives of a pool that
// exists join it at once, others wait until CreatePool makes a pool of
// them. The specs of servers with waiting drives are kept in the metadata
// store (pending.go), so a management service that takes over from
// another makes the pool of what was registered with the other.
type Registry struct {
	svc *Service
}

// NewRegistry returns the registry of svc.
func NewRegistry(svc *Service) *Registry { return &Registry{svc: svc} }

// RegisterServer records a storage server and its drives. A drive already
// in the map (same server, same path, not Out) keeps its ID; a new one joins
// the pool spec.Pool if it exists, else waits. The map changes (a new
// epoch) only when something in it changes.
func (r *Registry) RegisterServer(ctx context.Context, spec ServerSpec) (Registered, error) {
	if spec.Pool == "" {
		spec.Pool = "default"
	}
	if err := spec.Validate(); err != nil {
		return Registered{}, err
	}
	m, err := r.svc.Map(ctx)
	if err != nil {
		return Registered{}, err
	}
	if r.changes(m, spec) {
		joined := false
		m, err = r.svc.Update(ctx, func(m *clustermap.Map) error {
			joined = r.apply(m, spec)
			return nil
		})
		if err != nil {
			return Registered{}, fmt.Errorf("register server %s: %w", spec.ID, err)
		}
		if joined {
			r.svc.event(ctx, EventServerJoined, spec.ID, fmt.Sprintf("at %s with %d drives; map epoch %d", spec.Addr, len(spec.Drives), m.Epoch), 0)
		}
	}
	out := Registered{Epoch: m.Epoch}
	waiting := false
	for _, d := range spec.Drives {
		rd := RegisteredDrive{Path: d.Path, Pending: true}
		if md := driveAt(m, spec.ID, d.Path); md != nil {
			rd.ID, rd.Pending = md.ID, false
		}
		waiting = waiting || rd.Pending
		out.Drives = append(out.Drives, rd)
	}
	id := spec.ID
	if !waiting {
		spec = ServerSpec{}
	}
	if err := r.setPending(ctx, id, spec); err != nil {
		return Registered{}, fmt.Errorf("register server %s: %w", spec.ID, err)
	}
	return out, nil
}

// driveAt returns the drive of server id at path, or nil.
func driveAt(m *clustermap.Map, server, path string) *clustermap.Drive {
	for i := range m.Drives {
		d := &m.Drives[i]
		if d.Server == server && d.Path == path && d.State != clustermap.StateOut {
			return d
		}
	}
	return nil
}

// changes reports whether registering spec would change map m.
func (r *Registry) changes(m *clustermap.Map, spec ServerSpec) bool {
	i := slices.IndexFunc(m.Servers, func(s clustermap.Server) bool { return s.ID == spec.ID })
	if i < 0 || m.Servers[i] != spec.server() {
		return true
	}
	_, err := m.PoolByName(spec.Pool)
	for _, d := range spec.Drives {
		if driveAt(m, spec.ID, d.Path) == nil && err == nil {
			return true
		}
	}
	return false
}

func (s ServerSpec) server() clustermap.Server {
	return clustermap.Server{ID: s.ID, Addr: s.Addr, Rack: s.Rack, Enclosure: s.Enclosure}
}

// apply records spec in m; it reports whether the server is new.
func (r *Registry) apply(m *clustermap.Map, spec ServerSpec) (joined bool) {
	if i := slices.IndexFunc(m.Servers, func(s clustermap.Server) bool { return s.ID == spec.ID }); i >= 0 {
		m.Servers[i] = spec.server()
	} else {
		m.Servers = append(m.Servers, spec.server())
		joined = true
	}
	p, err := m.PoolByName(spec.Pool)
	if err != nil {
		return joined
	}
	for _, d := range spec.Drives {
		if driveAt(m, spec.ID, d.Path) == nil {
			addDriveTo(m, p, spec, d)
		}
	}
	return joined
}

// addDriveTo adds a new drive of spec's server to pool p of m.
func addDriveTo(m *clustermap.Map, p *clustermap.Pool, spec ServerSpec, d DriveSpec) {
	id := placement.DriveID(0)
	for _, x := range m.Drives {
		id = max(id, x.ID+1)
	}
	m.Drives = append(m.Drives, clustermap.Drive{ID: id, Server: spec.ID, Path: d.Path, Capacity: d.Capacity,
		Domain: spec.domain(), State: clustermap.StateUp, Pool: p.ID})
	p.Drives = append(p.Drives, id)
}

// PoolOfServers describes a pool made of the drives that wait for one.
type PoolOfServers struct {
	Name         string           `json:"name"`
	K            int              `json:"k"`
	M            int              `json:"m"`
	Unit         uint32           `json:"unit"`
	Preservation int              `json:"preservation"` // -1: the default for the pool size
	Layout       placement.Layout `json:"layout"`
	// Request is the call's id (requests.go): a repeated id gets the
	// first call's answer.
	Request string `json:"request,omitempty"`
}

// CreatePool makes a pool of every drive registered for it by name (or
// for no existing pool) and not yet in the map, sets its capacity limit,
// and, for the cluster's first pool, creates the root directory with the
// pool's layout. It returns the new map.
func (r *Registry) CreatePool(ctx context.Context, spec PoolOfServers) (*clustermap.Map, error) {
	pending, _, err := r.pending(ctx)
	if err != nil {
		return nil, err
	}
	var specs []ServerSpec
	for _, s := range pending {
		if s.Pool == spec.Name {
			specs = append(specs, s)
		}
	}
	sort.Slice(specs, func(i, j int) bool { return specs[i].ID < specs[j].ID })
	n := 0
	for _, s := range specs {
		n += len(s.Drives)
	}
	ps := PoolSpec{Name: spec.Name, Drives: n, K: spec.K, M: spec.M, Unit: spec.Unit, DriveSize: 1 << 20, Preservation: spec.Preservation}
	if err := ps.Validate(); err != nil {
		return nil, fmt.Errorf("pool %s of the %d drives registered for it: %w", spec.Name, n, err)
	}
	if spec.Preservation < 0 {
		spec.Preservation = clustermap.DefaultPreservation(n)
	}
	var poolID uint32
	m, err := r.svc.Update(ctx, func(m *clustermap.Map) error {
		if _, err := m.PoolByName(spec.Name); err == nil {
			return fmt.Errorf("%w: pool %q", meta.ErrExist, spec.Name)
		}
		poolID = 0
		for _, p := range m.Pools {
			poolID = max(poolID, p.ID+1)
		}
		m.Pools = append(m.Pools, clustermap.Pool{ID: poolID, Name: spec.Name, K: spec.K, M: spec.M, Unit: spec.Unit,
			PGs: placement.DefaultPGs(n, spec.K+spec.M), Layout: spec.Layout, Preservation: spec.Preservation})
		p := &m.Pools[len(m.Pools)-1]
		for _, s := range specs {
			r.apply(m, s)
		}
		if len(p.Drives) != n {
			return fmt.Errorf("%w: %d of the %d registered drives are in the map already", meta.ErrConflict, n-len(p.Drives), n)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	capa, err := m.PoolCapacity(poolID)
	if err != nil {
		return nil, err
	}
	if err := r.svc.store.SetPoolLimit(ctx, poolID, uint64(capa.UsableRaw)); err != nil {
		return nil, err
	}
	if len(m.Pools) == 1 {
		if err := r.svc.store.Init(ctx, meta.Layout{Pool: poolID, K: spec.K, M: spec.M, Unit: spec.Unit}); err != nil {
			return nil, err
		}
	}
	return m, r.awaitServed(ctx, m, poolID)
}

// servedWithin is how long CreatePool waits for the storage servers to
// serve the pool's drives (they learn their IDs at their next
// registration).
const servedWithin = 15 * time.Second

// awaitServed waits until every drive of the pool answers through its
// storage server, so that the pool takes writes once CreatePool returns.
func (r *Registry) awaitServed(ctx context.Context, m *clustermap.Map, poolID uint32) error {
	if r.svc.drives == nil {
		return nil
	}
	p, err := m.Pool(poolID)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(servedWithin)
	for _, id := range p.Drives {
		for {
			err := r.probeDrive(ctx, m, id)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("pool %s made, but drive %v does not answer through its server yet: %w", p.Name, id, err)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

func (r *Registry) probeDrive(ctx context.Context, m *clustermap.Map, id placement.DriveID) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	d, err := r.svc.drives.Drive(m, id)
	if err == nil {
		_, err = d.Stat(ctx)
	}
	return err
}

// RegisterMeta adds a metadata server's address to the map, where clients
// find it.
func (r *Registry) RegisterMeta(ctx context.Context, addr string) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("%w: metadata server address %q: %v", meta.ErrInvalid, addr, err)
	}
	m, err := r.svc.Map(ctx)
	if err != nil {
		return err
	}
	if slices.Contains(m.Meta, addr) {
		return nil
	}
	m, err = r.svc.Update(ctx, func(m *clustermap.Map) error {
		if !slices.Contains(m.Meta, addr) {
			m.Meta = append(m.Meta, addr)
		}
		return nil
	})
	if err == nil {
		r.svc.event(ctx, EventMetaJoined, addr, fmt.Sprintf("map epoch %d", m.Epoch), 0)
	}
	return err
}

// Register exposes the registry on an RPC server.
func (r *Registry) Register(srv Handler) {
	handleJSON(srv, "mgmt.RegisterServer", func(ctx context.Context, spec ServerSpec) (any, error) {
		return r.RegisterServer(ctx, spec)
	})
	handleJSON(srv, "mgmt.CreatePoolOfServers", func(ctx context.Context, spec PoolOfServers) (any, error) {
		return r.svc.once(ctx, "mgmt.CreatePoolOfServers", spec.Request, func() (any, error) { return r.CreatePool(ctx, spec) })
	})
	handleJSON(srv, "mgmt.RegisterMeta", func(ctx context.Context, addr string) (any, error) {
		return nil, r.RegisterMeta(ctx, addr)
	})
}

// RegisterServer registers a storage server (Registry.RegisterServer).
func (c *Client) RegisterServer(ctx context.Context, spec ServerSpec) (Registered, error) {
	var out Registered
	err := c.rc.Call(ctx, "mgmt.RegisterServer", spec, nil, &out)
	return out, err
}

// CreatePoolOfServers makes a pool of the registered drives waiting for
// it (Registry.CreatePool).
func (c *Client) CreatePoolOfServers(ctx context.Context, spec PoolOfServers) (*clustermap.Map, error) {
	var m clustermap.Map
	spec.Request = newRequestID()
	if err := c.rc.Call(ctx, "mgmt.CreatePoolOfServers", spec, nil, &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// RegisterMeta announces a metadata server (Registry.RegisterMeta).
func (c *Client) RegisterMeta(ctx context.Context, addr string) error {
	return c.rc.Call(ctx, "mgmt.RegisterMeta", addr, nil, nil)
}

// ServerDown marks every up drive of a storage server down in one map
// epoch: the server itself does not answer (its connections are refused or
// dropped), so none of its drives can be reached, and a client placing a
// stripe again must not pick another of them. Each drive comes back up on
// its own once a probe reaches it (CheckDrives), within its pool's grace.
func (s *Service) ServerDown(ctx context.Context, server, reason string) error {
	var ids []placement.DriveID
	m, err := s.Update(ctx, func(m *clustermap.Map) error {
		ids = ids[:0]
		now := time.Now()
		for _, d := range m.Drives {
			if d.Server != server || d.State != clustermap.StateUp {
				continue
			}
			if _, err := m.SetState(d.ID, clustermap.StateDown, now); err != nil {
				return err
			}
			ids = append(ids, d.ID)
		}
		if len(ids) == 0 {
			return errUnchanged
		}
		return nil
	})
	if errors.Is(err, errUnchanged) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("mark server %s down: %w", server, err)
	}
	for _, id := range ids {
		grace := clustermap.DefaultDownGrace
		if d, err := m.Drive(id); err == nil {
			if p, err := m.Pool(d.Pool); err == nil {
				grace = p.Grace()
			}
		}
		s.event(ctx, EventDriveDown, id.String(), fmt.Sprintf("server %s %s; map epoch %d; declared failed unless it answers within %v",
			server, reason, m.Epoch, grace), 0)
	}
	s.kickRebuild()
	return nil
}

// SetInProcessServer tells the service that storage server id runs in its
// own process (the embedded cluster of `poolfs up`). Such a server is never
// judged hung or down as a whole: a probe of it that times out measures
// this process being starved, not a server apart from it, and taking every
// drive of the cluster down for that would make all data unavailable. Its
// drives are still judged one by one (slow, failed). Call it before the
// service is used.
func (s *Service) SetInProcessServer(id string) { s.inProcess = id }

// inProcessDrive reports whether drive id of m is served in this process
// (SetInProcessServer).
func (s *Service) inProcessDrive(m *clustermap.Map, id placement.DriveID) bool {
	d, err := m.Drive(id)
	return err == nil && s.inProcess != "" && d.Server == s.inProcess
}

// pingTimeout bounds the question that tells a hung storage server from a
// slow drive (serverHung).
const pingTimeout = time.Second

// serverHung reports whether the server of drive id of m fails to answer a
// call that needs no drive I/O within pingTimeout: asked after a probe of
// the drive timed out, it tells a server that accepts connections but
// never answers (stopped, hung, cut off) from a drive that is merely slow.
func (s *Service) serverHung(ctx context.Context, m *clustermap.Map, id placement.DriveID) bool {
	if s.servers == nil || s.inProcessDrive(m, id) {
		return false
	}
	sc, err := s.servers.Server(m, id)
	if err != nil {
		return false
	}
	pctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	err = sc.Ping(pctx)
	return err != nil && ctx.Err() == nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, rpc.ErrUnavailable))
}
