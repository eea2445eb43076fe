package storage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"poolfs/internal/chunkstore"
	"poolfs/internal/clustermap"
	"poolfs/internal/erasure"
	"poolfs/internal/placement"
	"poolfs/internal/rpc"
	"poolfs/internal/stripeio"
)

// ErrNoDrive is returned for a drive this server does not own.
var ErrNoDrive = errors.New("storage: no such drive on this server")

// Errors is the table of sentinel errors that cross the wire from a storage
// server; both ends must use it.
func Errors() *rpc.ErrorTable { return rpc.NewErrorTable(ErrorCodes()...) }

// ErrorCodes lists the wire codes and sentinels of Errors, for servers that
// combine several services' tables.
func ErrorCodes() []any {
	return []any{
		"storage.nodrive", ErrNoDrive,
		"chunk.notfound", chunkstore.ErrNotFound,
		"chunk.full", chunkstore.ErrFull,
		"chunk.invalid", chunkstore.ErrInvalid,
		"chunk.failed", chunkstore.ErrFailed,
		"chunk.offline", chunkstore.ErrOffline,
	}
}

// Server serves a set of drives.
type Server struct {
	log  *slog.Logger
	gate ioGate // schedules rebuild I/O against client I/O (rebuild_gate.go)
	// limits keeps client writes out of the room rebuilds need
	// (write_limit.go).
	limits writeLimits
	// codecs are the erasure codecs of the schemes tasks met.
	codecs stripeio.Codecs
	// readBufs hold the replies of fragment reads until they are sent;
	// lastWhole is the size of the last whole-fragment read (handleRead).
	readBufs  chunkstore.Buffers
	lastWhole atomic.Int64
	mu        struct {
		sync.RWMutex
		drives map[placement.DriveID]chunkstore.Drive
		maps   func(context.Context) (*clustermap.Map, error)
		peers  Peers
	}
}

// NewServer returns a server for the given drives. The server does not own
// their lifetime.
func NewServer(drives map[placement.DriveID]chunkstore.Drive, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{log: log}
	s.mu.drives = map[placement.DriveID]chunkstore.Drive{}
	for id, d := range drives {
		s.mu.drives[id] = d
	}
	return s
}

// SetDrive adds or replaces a served drive (nil removes it).
func (s *Server) SetDrive(id placement.DriveID, d chunkstore.Drive) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d == nil {
		delete(s.mu.drives, id)
		return
	}
	s.mu.drives[id] = d
}

// Drive returns a served drive.
func (s *Server) Drive(id placement.DriveID) (chunkstore.Drive, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	d, ok := s.mu.drives[id]
	if !ok {
		return nil, fmt.Errorf("%w: %v", ErrNoDrive, id)
	}
	return d, nil
}

// DriveIDs lists the served drives in order.
func (s *Server) DriveIDs() []placement.DriveID {
	s.mu.RLock()
	defer s.mu.RUnlock()
	ids := make([]placement.DriveID, 0, len(s.mu.drives))
	for id := range s.mu.drives {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

type fragArgs struct {
	Drive placement.DriveID   `json:"drive"`
	Key   erasure.FragmentKey `json:"key"`
	Off   int64               `json:"off,omitempty"`
	N     int64               `json:"n,omitempty"`
	// Replaces is, for storage.Write, the generation of the same fragment
	// the write replaces (Replacing); 0 for none.
	Replaces uint64 `json:"replaces,omitempty"`
	// Deferred, for storage.Write, makes the write durable at the drive's
	// next storage.Sync rather than at once (chunkstore.Deferred).
	Deferred bool `json:"deferred,omitempty"`
}

type listArgs struct {
	Drive placement.DriveID `json:"drive"`
}

// FragmentInfo is one listed fragment.
type FragmentInfo struct {
	Key   erasure.FragmentKey `json:"key"`
	Size  int64               `json:"size"`
	MTime time.Time           `json:"mtime"`
}

// Register adds the storage methods to an RPC server.
func (s *Server) Register(r *rpc.Server) {
	r.Handle("storage.Write", s.handleWrite)
	r.Handle("storage.Read", s.handleRead)
	r.Handle("storage.Delete", s.handleDelete)
	r.Handle("storage.List", s.handleList)
	r.Handle("storage.Stat", s.handleStat)
	r.Handle("storage.Sync", s.handleSync)
	s.registerRecovery(r)
	r.Handle("storage.Drives", func(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
		return &rpc.Response{Result: s.DriveIDs()}, nil
	})
}

func (s *Server) fragDrive(req *rpc.Request) (fragArgs, chunkstore.Drive, error) {
	var a fragArgs
	if err := json.Unmarshal(req.Args, &a); err != nil {
		return a, nil, fmt.Errorf("%w: bad arguments: %v", chunkstore.ErrInvalid, err)
	}
	d, err := s.Drive(a.Drive)
	return a, d, err
}

func (s *Server) handleWrite(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	a, d, err := s.fragDrive(req)
	if err != nil {
		return nil, err
	}
	defer s.gate.client(a.Drive)()
	if a.Deferred {
		ctx = chunkstore.Deferred(ctx)
	}
	if err := s.clientWrite(ctx, a.Drive, d, a.Key, a.Replaces, req.Body); err != nil {
		return nil, err
	}
	return &rpc.Response{}, nil
}

func (s *Server) handleRead(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	a, d, err := s.fragDrive(req)
	if err != nil {
		return nil, err
	}
	defer s.gate.client(a.Drive)()
	n := a.N
	if n == 0 {
		n = -1
	}
	// The fragment is read into a pooled buffer, handed back once the reply
	// is sent. A whole-fragment read (n < 0) takes a buffer the size of the
	// last whole read: a pool's fragments are mostly one size. A fragment
	// larger than the buffer is read into a new one, as without the pool.
	hint := n
	if hint < 0 {
		hint = s.lastWhole.Load()
	}
	var dst []byte
	if hint > 0 && hint <= maxPooledRead {
		dst = s.readBufs.Get(int(hint))
	}
	b, err := d.ReadFragment(ctx, a.Key, a.Off, n, dst)
	if err != nil {
		s.readBufs.Put(dst)
		return nil, err
	}
	if n < 0 {
		s.lastWhole.Store(int64(len(b)))
	}
	if dst == nil {
		return &rpc.Response{Body: b}, nil
	}
	return &rpc.Response{Body: b, Done: func() { s.readBufs.Put(dst) }}, nil
}

// maxPooledRead is the largest read served from the server's buffer pool.
const maxPooledRead = 64 << 20

func (s *Server) handleDelete(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	a, d, err := s.fragDrive(req)
	if err != nil {
		return nil, err
	}
	defer s.gate.client(a.Drive)()
	return &rpc.Response{}, d.DeleteFragment(ctx, a.Key)
}

func (s *Server) handleList(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	var a listArgs
	if err := json.Unmarshal(req.Args, &a); err != nil {
		return nil, fmt.Errorf("%w: bad arguments: %v", chunkstore.ErrInvalid, err)
	}
	d, err := s.Drive(a.Drive)
	if err != nil {
		return nil, err
	}
	var out []FragmentInfo
	err = d.ListFragments(ctx, func(k erasure.FragmentKey, size int64, mtime time.Time) error {
		out = append(out, FragmentInfo{Key: k, Size: size, MTime: mtime})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &rpc.Response{Result: out}, nil
}

func (s *Server) handleStat(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	d, err := s.listDrive(req)
	if err != nil {
		return nil, err
	}
	u, err := d.Stat(ctx)
	if err != nil {
		return nil, err
	}
	u.ServerTime = time.Now().UnixNano() // the management service compares clocks with it
	return &rpc.Response{Result: u}, nil
}

// handleSync makes the drive's deferred writes durable.
func (s *Server) handleSync(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
	var a listArgs
	if err := json.Unmarshal(req.Args, &a); err != nil {
		return nil, fmt.Errorf("%w: bad arguments: %v", chunkstore.ErrInvalid, err)
	}
	d, err := s.Drive(a.Drive)
	if err != nil {
		return nil, err
	}
	defer s.gate.client(a.Drive)() // a flush holds the drive: rebuild I/O queues behind it
	if err := d.Sync(ctx); err != nil {
		return nil, err
	}
	return &rpc.Response{}, nil
}

// listDrive decodes listArgs and returns the drive they name.
func (s *Server) listDrive(req *rpc.Request) (chunkstore.Drive, error) {
	var a listArgs
	if err := json.Unmarshal(req.Args, &a); err != nil {
		return nil, fmt.Errorf("%w: bad arguments: %v", chunkstore.ErrInvalid, err)
	}
	return s.Drive(a.Drive)
}
