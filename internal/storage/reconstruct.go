package storage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"poolfs/internal/chunkstore"
	"poolfs/internal/clustermap"
	"poolfs/internal/erasure"
	"poolfs/internal/placement"
	"poolfs/internal/rpc"
	"poolfs/internal/stripeio"
)

// Peers reaches the drives of other storage servers (a *Dialer does).
type Peers interface {
	Drive(m *clustermap.Map, id placement.DriveID) (chunkstore.Drive, error)
}

// SetPeers lets the server run reconstruct tasks: maps returns the current
// cluster map, peers reaches drives this server does not own. Call it
// before serving storage.Reconstruct.
func (s *Server) SetPeers(maps func(context.Context) (*clustermap.Map, error), peers Peers) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.maps, s.mu.peers = maps, peers
}

// FragmentAt is fragment Index of a stripe on drive Drive.
type FragmentAt struct {
	Index int               `json:"index"`
	Drive placement.DriveID `json:"drive"`
}

// ReconstructArgs is one reconstruct (or copy) task: read K fragments of a
// stripe generation from Sources (in order of preference; a later one is
// read only when one read fails, at once), decode, and write the fragments
// named by Targets. If every target index is among Sources, the task
// copies: it reads only those sources and fails if one of its fragments
// cannot be read. The reading, verifying and writing is stripeio's.
type ReconstructArgs struct {
	Ino       uint64       `json:"ino"`
	Stripe    uint64       `json:"stripe"`
	Gen       uint64       `json:"gen"`
	K         int          `json:"k"`
	M         int          `json:"m"`
	Pool      uint32       `json:"pool"`
	StripeLen uint32       `json:"len"`
	ShardSize uint32       `json:"shard"`
	Sources   []FragmentAt `json:"sources"`
	Targets   []FragmentAt `json:"targets"`
	// Share is the largest fraction of a drive's time the task's I/O may
	// take while clients use that drive (the rebuild priority); 0 or 1
	// means no limit. Drives without client I/O are never limited. See
	// rebuild_gate.go.
	Share float64 `json:"share,omitempty"`
}

// ReconstructResult reports the I/O a task did.
type ReconstructResult struct {
	Read    []FragmentAt `json:"read"`    // fragments read and verified
	Bytes   int64        `json:"bytes"`   // bytes read + written
	Written int          `json:"written"` // fragments written
	Nanos   int64        `json:"ns"`
}

func (a *ReconstructArgs) validate() error {
	switch {
	case a.K < 1 || a.M < 0 || a.K+a.M > erasure.MaxShards:
		return fmt.Errorf("%w: scheme %d+%d", chunkstore.ErrInvalid, a.K, a.M)
	case a.ShardSize == 0 || a.ShardSize > erasure.MaxShardSize || a.StripeLen == 0 ||
		uint64(a.StripeLen) > uint64(a.K)*uint64(a.ShardSize):
		return fmt.Errorf("%w: shard size %d, stripe length %d", chunkstore.ErrInvalid, a.ShardSize, a.StripeLen)
	case !(a.Share >= 0 && a.Share <= 1):
		return fmt.Errorf("%w: share %g: want 0..1", chunkstore.ErrInvalid, a.Share)
	case len(a.Targets) == 0 || len(a.Targets) > a.M+a.K:
		return fmt.Errorf("%w: %d targets", chunkstore.ErrInvalid, len(a.Targets))
	}
	for _, f := range append(slices.Clone(a.Sources), a.Targets...) {
		if f.Index < 0 || f.Index >= a.K+a.M {
			return fmt.Errorf("%w: fragment index %d of %d+%d", chunkstore.ErrInvalid, f.Index, a.K, a.M)
		}
	}
	return nil
}

// taskDrives returns the drives a task at share reaches: this server's
// own, whose every I/O first waits for the rebuild gate to admit it at
// share, else a peer's (whose server gates its own I/O).
func (s *Server) taskDrives(ctx context.Context, share float64) stripeio.Drives {
	return func(id placement.DriveID) (stripeio.Drive, error) {
		if d, err := s.Drive(id); err == nil {
			return rebuildDrive{d: d, gate: &s.gate, id: id, share: share}, nil
		}
		s.mu.RLock()
		maps, peers := s.mu.maps, s.mu.peers
		s.mu.RUnlock()
		if maps == nil || peers == nil {
			return nil, fmt.Errorf("%w: %v (no peers configured)", ErrNoDrive, id)
		}
		m, err := maps(ctx)
		if err != nil {
			return nil, err
		}
		return stripeio.OnMap(peers, m)(id)
	}
}

// rebuildDrive is one of the server's own drives as a task at share sees
// it: each read and write first waits for the rebuild gate.
type rebuildDrive struct {
	d     chunkstore.Drive
	gate  *ioGate
	id    placement.DriveID
	share float64
}

func (g rebuildDrive) ReadFragment(ctx context.Context, key erasure.FragmentKey, off, n int64, dst []byte) ([]byte, error) {
	done, err := g.gate.acquire(ctx, g.id, g.share)
	if err != nil {
		return nil, err
	}
	defer done()
	return g.d.ReadFragment(ctx, key, off, n, dst)
}

func (g rebuildDrive) WriteFragment(ctx context.Context, key erasure.FragmentKey, frag []byte) error {
	done, err := g.gate.acquire(ctx, g.id, g.share)
	if err != nil {
		return err
	}
	defer done()
	return g.d.WriteFragment(ctx, key, frag)
}

func (g rebuildDrive) DeleteFragment(ctx context.Context, key erasure.FragmentKey) error {
	return g.d.DeleteFragment(ctx, key)
}

// Reconstruct runs one task; see ReconstructArgs.
func (s *Server) Reconstruct(ctx context.Context, a *ReconstructArgs) (*ReconstructResult, error) {
	start := time.Now()
	if err := a.validate(); err != nil {
		return nil, err
	}
	width, sz := a.K+a.M, int(a.ShardSize)
	st := &stripeio.Stripe{Ino: a.Ino, Stripe: a.Stripe, Gen: a.Gen, K: a.K, M: a.M, Pool: a.Pool, Len: a.StripeLen, ShardSize: sz}
	at := s.taskDrives(ctx, a.Share)
	// A task whose targets are all among its sources copies them; else it
	// reads any k fragments and decodes.
	copyOnly := true
	for _, t := range a.Targets {
		if !slices.ContainsFunc(a.Sources, func(f FragmentAt) bool { return f.Index == t.Index }) {
			copyOnly = false
		}
	}
	f := &stripeio.Fetch{Stripe: st, Need: a.K, At: at}
	for _, src := range a.Sources {
		if copyOnly && !slices.ContainsFunc(a.Targets, func(t FragmentAt) bool { return t.Index == src.Index }) {
			continue // only the fragments to copy count
		}
		f.Sources = append(f.Sources, stripeio.Loc{Index: src.Index, Drive: src.Drive})
	}
	if copyOnly {
		f.Need = 0
		for i := range width {
			if slices.ContainsFunc(a.Targets, func(t FragmentAt) bool { return t.Index == i }) {
				f.Need++
			}
		}
	}
	got, err := f.Get(ctx)
	if err == nil && got.OK < f.Need {
		err = fmt.Errorf("%d of %d fragments readable: %w", got.OK, f.Need, errors.Join(got.Errs...))
	}
	if err != nil {
		return nil, fmt.Errorf("reconstruct %d/%d gen %d: %w", a.Ino, a.Stripe, a.Gen, err)
	}
	res := &ReconstructResult{}
	for _, l := range got.Read {
		res.Read = append(res.Read, FragmentAt{Index: l.Index, Drive: l.Drive})
	}
	res.Bytes = int64(len(got.Read) * st.FragmentSize())
	shards := got.Shards
	if !copyOnly {
		want := make([]int, len(a.Targets))
		for j, t := range a.Targets {
			want[j] = t.Index
		}
		if err := stripeio.Reconstruct(&s.codecs, st, shards, want); err != nil {
			return nil, fmt.Errorf("reconstruct %d/%d gen %d: %w", a.Ino, a.Stripe, a.Gen, err)
		}
	}
	targets := make([]stripeio.Loc, len(a.Targets))
	frags := make([][]byte, len(a.Targets))
	for j, t := range a.Targets {
		targets[j], frags[j] = stripeio.Loc{Index: t.Index, Drive: t.Drive}, stripeio.NewFragment(st, shards[t.Index])
	}
	werrs := stripeio.WriteFragments(ctx, at, st, targets, frags)
	if err := errors.Join(werrs...); err != nil {
		return nil, err
	}
	res.Written = len(a.Targets)
	res.Bytes += int64(len(a.Targets) * erasure.FragmentSize(sz))
	res.Nanos = int64(time.Since(start))
	return res, nil
}

// FaultArgs injects a fault into a served drive (emulation and tests).
type FaultArgs struct {
	Drive    placement.DriveID `json:"drive"`
	Op       string            `json:"op"` // fail, heal, offline, online, corrupt, slow
	Fraction float64           `json:"fraction,omitempty"`
	Delay    time.Duration     `json:"delay,omitempty"`
	Seed     int64             `json:"seed,omitempty"`
}

// Fault applies a to a drive this server wraps with chunkstore.WithFaults.
func (s *Server) Fault(a FaultArgs) error {
	d, err := s.Drive(a.Drive)
	if err != nil {
		return err
	}
	f, ok := d.(*chunkstore.FaultyDrive)
	if !ok {
		return fmt.Errorf("%w: drive %v does not take injected faults", chunkstore.ErrInvalid, a.Drive)
	}
	switch a.Op {
	case "fail":
		f.Fail()
	case "heal":
		f.Heal()
	case "offline":
		f.Offline()
	case "online":
		f.Online()
	case "corrupt":
		if a.Fraction < 0 || a.Fraction > 1 {
			return fmt.Errorf("%w: corrupt fraction %g: want 0..1", chunkstore.ErrInvalid, a.Fraction)
		}
		f.CorruptReads(a.Fraction, a.Seed)
	case "slow":
		if a.Delay < 0 {
			return fmt.Errorf("%w: slow %v", chunkstore.ErrInvalid, a.Delay)
		}
		f.SlowDown(a.Delay)
	default:
		return fmt.Errorf("%w: fault %q: want fail, heal, offline, online, corrupt or slow", chunkstore.ErrInvalid, a.Op)
	}
	s.log.Warn("fault injected", "drive", a.Drive.String(), "op", a.Op, "fraction", a.Fraction, "delay", a.Delay)
	return nil
}

func (s *Server) registerRecovery(r *rpc.Server) {
	r.Handle("storage.Reconstruct", func(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
		var a ReconstructArgs
		if err := json.Unmarshal(req.Args, &a); err != nil {
			return nil, fmt.Errorf("%w: bad arguments: %v", chunkstore.ErrInvalid, err)
		}
		res, err := s.Reconstruct(ctx, &a)
		if err != nil {
			return nil, err
		}
		return &rpc.Response{Result: res}, nil
	})
	r.Handle("storage.Fault", func(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
		var a FaultArgs
		if err := json.Unmarshal(req.Args, &a); err != nil {
			return nil, fmt.Errorf("%w: bad arguments: %v", chunkstore.ErrInvalid, err)
		}
		return &rpc.Response{}, s.Fault(a)
	})
}

// ServerClient calls the server-level methods of a storage server (not
// tied to one drive).
type ServerClient struct{ c *rpc.Client }

// NewServerClient wraps an RPC client connected to a storage server.
func NewServerClient(c *rpc.Client) *ServerClient { return &ServerClient{c: c} }

// Reconstruct runs a reconstruct task on the server.
func (sc *ServerClient) Reconstruct(ctx context.Context, a *ReconstructArgs) (*ReconstructResult, error) {
	var res ReconstructResult
	if err := sc.c.Call(ctx, "storage.Reconstruct", a, nil, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Fault injects a fault into one of the server's drives.
func (sc *ServerClient) Fault(ctx context.Context, a FaultArgs) error {
	return sc.c.Call(ctx, "storage.Fault", a, nil, nil)
}

// Server returns a client for the storage server that owns drive id.
func (d *Dialer) Server(m *clustermap.Map, id placement.DriveID) (*ServerClient, error) {
	addr, err := m.ServerAddr(id)
	if err != nil {
		return nil, err
	}
	c, err := d.client(addr, 0)
	if err != nil {
		return nil, err
	}
	return NewServerClient(c), nil
}
