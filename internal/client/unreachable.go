package client

import (
	"context"
	"fmt"
	"sync"
	"time"

	"poolfs/internal/chunkstore"
	"poolfs/internal/clustermap"
	"poolfs/internal/erasure"
	"poolfs/internal/placement"
	"poolfs/internal/stripeio"
)

// Servers this client cannot reach although the map says they are up: a
// one-way partition between this client and one storage server, while
// the management service still reaches it (so it stays up in the map).
// Nothing refuses or resets the connection, so a fragment write to such
// a server would wait for ever. The client tells one apart by progress:
// a server with a fragment write pending to which no write (to any of
// its drives) has completed for Options.UnreachableAfter is unreachable,
// and so is one whose write failed as unreachable (rpc.ErrUnavailable: a
// dial or handshake that timed out) while the map keeps it up. Progress
// is the server's, not each drive's: over a busy link the writes to one
// drive can all wait for many seconds behind the others (each client
// keeps several in flight per drive, each on a connection of its own)
// while its server takes bytes at its link's rate; taking that for a
// partition avoided a healthy server for AvoidFor, and its stripes went
// to other servers (read unevenly, and moved back by a rebalance). Then:
//
//   - the stripe write that waits for it is given up (write_watch.go) and
//     placed again on a view of the map in which every drive of that
//     server is out, as if the management service had marked them down:
//     the write succeeds on the other servers;
//   - the server is avoided for Options.AvoidFor: new stripes are placed
//     around it and reads fetch parity in place of its fragments from
//     the start, as for a drive the map says is down;
//   - the client reports it (Options.OnUnreachable); the management
//     service probes it itself and marks it down only if it does not
//     answer the service either, so one client's trouble never takes a
//     healthy server out of the map.

// Defaults of Options.UnreachableAfter and Options.AvoidFor.
const (
	DefaultUnreachableAfter = 10 * time.Second
	DefaultAvoidFor         = 30 * time.Second
)

// unreachables is the client's record of write progress per server (by
// avoidKey) and of the servers it avoids.
type unreachables struct {
	mu struct {
		sync.Mutex
		servers map[string]*serverProgress
		avoid   map[string]time.Time // server id → avoided until
		version uint64               // bumped when avoid changes
	}
}

// serverProgress is a server's fragment writes: how many are pending and
// when the server last made progress (a write completed, or one was sent
// while none was pending).
type serverProgress struct {
	pending int
	since   time.Time
}

func newUnreachables() *unreachables {
	u := &unreachables{}
	u.mu.servers = map[string]*serverProgress{}
	u.mu.avoid = map[string]time.Time{}
	return u
}

// started notes a fragment write to server being sent.
func (u *unreachables) started(server string, now time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	p := u.mu.servers[server]
	if p == nil {
		p = &serverProgress{}
		u.mu.servers[server] = p
	}
	if p.pending == 0 {
		p.since = now
	}
	p.pending++
}

// done notes a fragment write to server having ended; ok: the drive
// answered (with success or an error of its own).
func (u *unreachables) done(server string, ok bool, now time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	p := u.mu.servers[server]
	p.pending--
	if ok {
		p.since = now
	}
	if p.pending == 0 {
		delete(u.mu.servers, server)
	}
}

// stuck returns the first of ids (drives of m) whose server has a write
// pending and made no progress for after.
func (u *unreachables) stuck(m *clustermap.Map, ids []uint32, after time.Duration, now time.Time) (placement.DriveID, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, id := range ids {
		if p := u.mu.servers[progressKey(m, placement.DriveID(id))]; p != nil && p.pending > 0 && now.Sub(p.since) >= after {
			return placement.DriveID(id), true
		}
	}
	return 0, false
}

// progressKey is what write progress is counted under for drive id of
// m: its server (avoidKey), or the drive alone if m does not know it.
func progressKey(m *clustermap.Map, id placement.DriveID) string {
	if d, err := m.Drive(id); err == nil {
		return avoidKey(d)
	}
	return "drive " + id.String()
}

// avoidServer avoids server until until.
func (u *unreachables) avoidServer(server string, until time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.mu.avoid[server] = until
	u.mu.version++
}

// avoided returns the servers avoided at now and the version of the set
// (forgetting those whose time has passed).
func (u *unreachables) avoided(now time.Time) (map[string]bool, uint64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out map[string]bool
	for s, until := range u.mu.avoid {
		if !now.Before(until) {
			delete(u.mu.avoid, s)
			u.mu.version++
			continue
		}
		if out == nil {
			out = map[string]bool{}
		}
		out[s] = true
	}
	return out, u.mu.version
}

// avoids reports whether drive id of m is on a server the client avoids.
func (c *Client) avoids(m *clustermap.Map, id placement.DriveID, now time.Time) bool {
	servers, _ := c.unreach.avoided(now)
	if servers == nil {
		return false
	}
	d, err := m.Drive(id)
	return err == nil && servers[avoidKey(d)]
}

// avoidKey is what the client avoids for drive d: its server, or the
// drive alone if the map names no server for it (a map made by hand).
func avoidKey(d *clustermap.Drive) string {
	if d.Server == "" {
		return "drive " + d.ID.String()
	}
	return d.Server
}

// unreachable marks the server of drive id unreachable from this client:
// it is avoided for Options.AvoidFor and, if report, reported. A drive the
// map says is not up is left alone: placement goes around it already.
func (c *Client) unreachable(m *clustermap.Map, id placement.DriveID, report bool) {
	d, err := m.Drive(id)
	if err != nil || d.State != clustermap.StateUp {
		return
	}
	c.unreach.avoidServer(avoidKey(d), time.Now().Add(c.opts.AvoidFor))
	c.log.Warn("drive does not answer this client; its server is avoided",
		"drive", id.String(), "server", d.Server, "for", c.opts.AvoidFor.String())
	if report && c.opts.OnUnreachable != nil {
		c.opts.OnUnreachable(id)
	}
}

// writePGMap is the placement of pool for new stripes: the map's, or, while
// the client avoids servers with drives in the pool, one computed from a
// copy of the map in which their drives are out.
func (c *Client) writePGMap(ctx context.Context, pool uint32) (*clustermap.Map, *placement.PGMap, error) {
	m, pm, err := c.pgMap(ctx, pool)
	if err != nil {
		return nil, nil, err
	}
	servers, version := c.unreach.avoided(time.Now())
	if servers == nil {
		return m, pm, nil
	}
	c.mu.Lock()
	a := c.mu.avoidPG[pool]
	c.mu.Unlock()
	if a.m == m && a.version == version {
		return m, a.pm, nil
	}
	v := m.Clone()
	changed := false
	for i := range v.Drives {
		if d := &v.Drives[i]; servers[avoidKey(d)] && d.State == clustermap.StateUp {
			d.State, changed = clustermap.StateDown, true
		}
	}
	if !changed {
		return m, pm, nil
	}
	pp, err := v.Placement(pool)
	if err != nil {
		return nil, nil, err
	}
	apm, err := pp.Map()
	if err != nil {
		// Too few drives without the avoided servers: the map's own
		// placement is all there is.
		return m, pm, nil
	}
	c.mu.Lock()
	c.mu.avoidPG[pool] = avoidPG{m: m, version: version, pm: apm}
	c.mu.Unlock()
	return m, apm, nil
}

// avoidPG is a pool's placement around the avoided servers, for map m and
// version of the avoided set.
type avoidPG struct {
	m       *clustermap.Map
	version uint64
	pm      *placement.PGMap
}

// progressDrives wraps at (drives of m) so that every fragment write is
// counted in the client's progress per server.
func (c *Client) progressDrives(m *clustermap.Map, at stripeio.Drives) stripeio.Drives {
	return func(id placement.DriveID) (stripeio.Drive, error) {
		d, err := at(id)
		if err != nil {
			return nil, err
		}
		return &progressDrive{Drive: d, server: progressKey(m, id), u: c.unreach}, nil
	}
}

// progressDrive counts its fragment writes in u, under its server.
type progressDrive struct {
	stripeio.Drive
	server string
	u      *unreachables
}

func (d *progressDrive) WriteFragment(ctx context.Context, key erasure.FragmentKey, frag []byte) error {
	d.u.started(d.server, time.Now())
	err := d.Drive.WriteFragment(ctx, key, frag)
	d.u.done(d.server, ctx.Err() == nil, time.Now())
	return err
}

// InProcess is the wrapped drive's.
func (d *progressDrive) InProcess() bool { return chunkstore.IsInProcess(d.Drive) }

var (
	_ stripeio.Drive       = (*progressDrive)(nil)
	_ chunkstore.InProcess = (*progressDrive)(nil)
)

// errUnreachable is the cause of a stripe write given up because a drive
// made no progress for Options.UnreachableAfter. Like errTargetDown it is
// a clustermap.ErrNoDrive, so the stripe is placed again.
var errUnreachable = fmt.Errorf("%w: a drive of the stripe does not answer this client", errTargetDown)
