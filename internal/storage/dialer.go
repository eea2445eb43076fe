package storage

import (
	"fmt"
	"sync"

	"poolfs/internal/chunkstore"
	"poolfs/internal/clustermap"
	"poolfs/internal/placement"
	"poolfs/internal/rpc"
)

// Dialer resolves drives of a cluster map to remote drives, keeping one
// RPC client (a pool of connections) per storage server address.
type Dialer struct {
	secret []byte
	opts   rpc.ClientOptions
	mu     struct {
		sync.Mutex
		clients map[string]*rpc.Client
	}
}

// NewDialer returns a dialer authenticating with the cluster secret.
func NewDialer(secret []byte, opts rpc.ClientOptions) *Dialer {
	if opts.Errors == nil {
		opts.Errors = Errors()
	}
	d := &Dialer{secret: secret, opts: opts}
	d.mu.clients = map[string]*rpc.Client{}
	return d
}

// Drive returns drive id of map m.
func (d *Dialer) Drive(m *clustermap.Map, id placement.DriveID) (chunkstore.Drive, error) {
	addr, err := m.ServerAddr(id)
	if err != nil {
		return nil, err
	}
	c, err := d.client(addr)
	if err != nil {
		return nil, fmt.Errorf("drive %v: %w", id, err)
	}
	return NewRemoteDrive(c, id), nil
}

func (d *Dialer) client(addr string) (*rpc.Client, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if c := d.mu.clients[addr]; c != nil {
		return c, nil
	}
	c, err := rpc.Dial(addr, d.secret, d.opts)
	if err != nil {
		return nil, err
	}
	d.mu.clients[addr] = c
	return c, nil
}

// Close closes every client.
func (d *Dialer) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for a, c := range d.mu.clients {
		_ = c.Close()
		delete(d.mu.clients, a)
	}
	return nil
}
