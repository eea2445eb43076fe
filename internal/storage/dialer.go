package storage

import (
	"fmt"
	"sync"
	"time"

	"poolfs/internal/chunkstore"
	"poolfs/internal/clustermap"
	"poolfs/internal/placement"
	"poolfs/internal/rpc"
)

// Dialer resolves drives of a cluster map to remote drives, keeping one
// RPC client (a pool of connections) per storage server address. A dial
// runs without the dialer's lock, so a server whose dial hangs (its
// packets vanish: up to the handshake timeout) holds up only the callers
// of that server; its failure is remembered for dialRetry, during which
// they fail at once.
type Dialer struct {
	secret   []byte
	opts     rpc.ClientOptions
	perDrive int // if > 0, a server's calls in flight: perDrive × its drives
	mu       struct {
		sync.Mutex
		clients map[string]*rpc.Client
		dialing map[string]*dialing // dials in flight or failed lately, by address
	}
}

// dialRetry is how long a failed dial of an address is answered with its
// error before the address is dialled again.
const dialRetry = 2 * time.Second

// dialing is a dial of one address: done is closed when it ends, with err
// set if it failed (at failed).
type dialing struct {
	done   chan struct{}
	err    error
	failed time.Time
}

// NewDialer returns a dialer authenticating with the cluster secret.
func NewDialer(secret []byte, opts rpc.ClientOptions) *Dialer {
	if opts.Errors == nil {
		opts.Errors = Errors()
	}
	d := &Dialer{secret: secret, opts: opts}
	d.mu.clients = map[string]*rpc.Client{}
	d.mu.dialing = map[string]*dialing{}
	return d
}

// ClientCallsPerDrive is how many calls a client (a mount, a bench task)
// has in flight to one storage server at most per drive the server has
// in the map (when the client first dials it); more wait their turn.
// Every call in flight is a TCP connection of its own (package rpc), and
// the connections of all clients writing to a server converge on its one
// link: with dozens per client, their minimum windows together overflow
// the buffer of the switch port in front of the server, every connection
// loses packets all the time, and lost retransmissions wait for TCP's
// retransmission timeout, doubled each time: writes stall for seconds.
// Two keep each drive busy with one fragment while the next arrives, as
// Lustre's clients keep a few RPCs in flight per storage target.
const ClientCallsPerDrive = 2

// NewClientDialer returns the dialer of a client's data path: at most
// ClientCallsPerDrive calls in flight per drive of each storage server
// (opts' MaxConns is replaced).
func NewClientDialer(secret []byte, opts rpc.ClientOptions) *Dialer {
	d := NewDialer(secret, opts)
	d.perDrive = ClientCallsPerDrive
	return d
}

// Drive returns drive id of map m.
func (d *Dialer) Drive(m *clustermap.Map, id placement.DriveID) (chunkstore.Drive, error) {
	addr, err := m.ServerAddr(id)
	if err != nil {
		return nil, err
	}
	calls := 0
	if d.perDrive > 0 {
		srv, _ := m.Drive(id) // ServerAddr found it
		for _, dr := range m.Drives {
			if dr.Server == srv.Server {
				calls += d.perDrive
			}
		}
	}
	c, err := d.client(addr, calls)
	if err != nil {
		return nil, fmt.Errorf("drive %v: %w", id, err)
	}
	return NewRemoteDrive(c, id), nil
}

// client returns the client of addr, dialling it if need be with at most
// calls in flight (0: as the dialer's options say).
func (d *Dialer) client(addr string, calls int) (*rpc.Client, error) {
	d.mu.Lock()
	if c := d.mu.clients[addr]; c != nil {
		d.mu.Unlock()
		return c, nil
	}
	if g := d.mu.dialing[addr]; g != nil {
		d.mu.Unlock()
		<-g.done
		if g.err == nil || time.Since(g.failed) < dialRetry {
			return d.clientAfter(addr, g)
		}
		d.mu.Lock()
		if d.mu.dialing[addr] == g {
			delete(d.mu.dialing, addr)
		}
		d.mu.Unlock()
		return d.client(addr, calls)
	}
	g := &dialing{done: make(chan struct{})}
	d.mu.dialing[addr] = g
	d.mu.Unlock()
	opts := d.opts
	if calls > 0 {
		opts.MaxConns = calls
	}
	c, err := rpc.Dial(addr, d.secret, opts)
	d.mu.Lock()
	if err == nil {
		d.mu.clients[addr] = c
		delete(d.mu.dialing, addr)
	} else {
		g.err, g.failed = err, time.Now()
	}
	d.mu.Unlock()
	close(g.done)
	return c, err
}

// clientAfter is the outcome of dial g of addr, which has ended.
func (d *Dialer) clientAfter(addr string, g *dialing) (*rpc.Client, error) {
	if g.err != nil {
		return nil, g.err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if c := d.mu.clients[addr]; c != nil {
		return c, nil
	}
	return nil, fmt.Errorf("storage: %s: %w", addr, rpc.ErrClosed)
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
