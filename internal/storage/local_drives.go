package storage

import (
	"context"

	"poolfs/internal/chunkstore"
	"poolfs/internal/clustermap"
	"poolfs/internal/erasure"
	"poolfs/internal/placement"
)

// InProcess resolves drives for a client that runs in the same process as
// s (`poolfs up --mount`): a drive s serves is used directly, so fragments
// go between the drive and the client's stripe buffers without crossing a
// socket (two copies and a TCP stack fewer per byte); any other drive comes
// from remote (a *Dialer, as for SetPeers). Direct use is client I/O to the rebuild gate exactly as an
// RPC request to s would be, so rebuild priority works the same. The
// drives' errors are the same sentinels an RPC client sees.
func (s *Server) InProcess(remote Peers) Peers {
	return inProcess{s: s, remote: remote}
}

type inProcess struct {
	s      *Server
	remote Peers
}

func (p inProcess) Drive(m *clustermap.Map, id placement.DriveID) (chunkstore.Drive, error) {
	if d, err := p.s.Drive(id); err == nil {
		return gatedDrive{Drive: d, id: id, s: p.s}, nil
	}
	return p.remote.Drive(m, id)
}

// gatedDrive is a served drive used in process: its fragment reads,
// writes, deletes and syncs count as client I/O, and its writes keep to the
// drive's client write limit, as storage.Read/Write/Delete do.
type gatedDrive struct {
	chunkstore.Drive
	id placement.DriveID
	s  *Server
}

var _ chunkstore.Drive = gatedDrive{}

func (g gatedDrive) WriteFragment(ctx context.Context, key erasure.FragmentKey, frag []byte) error {
	defer g.s.gate.client(g.id)()
	return g.s.clientWrite(ctx, g.id, g.Drive, key, replacedGen(ctx), frag)
}

func (g gatedDrive) ReadFragment(ctx context.Context, key erasure.FragmentKey, off, n int64, dst []byte) ([]byte, error) {
	defer g.s.gate.client(g.id)()
	return g.Drive.ReadFragment(ctx, key, off, n, dst)
}

func (g gatedDrive) DeleteFragment(ctx context.Context, key erasure.FragmentKey) error {
	defer g.s.gate.client(g.id)()
	return g.Drive.DeleteFragment(ctx, key)
}

// Sync holds the drive like any client I/O (a flush): the rebuild gate
// must see it, or it admits rebuild I/O that queues behind the flush and
// takes that wait for the drive's service time.
func (g gatedDrive) Sync(ctx context.Context) error {
	defer g.s.gate.client(g.id)()
	return g.Drive.Sync(ctx)
}

var _ chunkstore.InProcess = gatedDrive{}

// InProcess: a served drive used in process answers without a round trip.
func (g gatedDrive) InProcess() bool { return true }
