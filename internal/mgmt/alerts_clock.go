package mgmt

import (
	"slices"
	"sync"
	"time"

	"poolfs/internal/alerts"
	"poolfs/internal/chunkstore"
	"poolfs/internal/clustermap"
	"poolfs/internal/placement"
)

// clockStale is the age past which a server's clock reading is dropped
// (its drives no longer answer probes).
const clockStale = 5 * time.Minute

// clockWatch keeps the last clock comparison with each storage server. A
// storage server puts its clock in its answers to storage.Stat
// (chunkstore.Usage.ServerTime); the failure detector's probe compares it
// with the midpoint of its own clock's send and receive times, so the
// reading is right to within half the round trip.
type clockWatch struct {
	mu struct {
		sync.Mutex
		skew map[string]clockReading // by server ID
	}
}

type clockReading struct {
	skew time.Duration
	at   time.Time
}

// record notes the clock of drive id's server from a probe sent at start
// and answered at end; a reply without a time (an older server) is
// ignored.
func (c *clockWatch) record(m *clustermap.Map, id placement.DriveID, u chunkstore.Usage, start, end time.Time) {
	if u.ServerTime == 0 {
		return
	}
	d, err := m.Drive(id)
	if err != nil || d.Server == "" {
		return
	}
	mid := start.Add(end.Sub(start) / 2)
	skew := time.Unix(0, u.ServerTime).Sub(mid)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.skew == nil {
		c.mu.skew = map[string]clockReading{}
	}
	c.mu.skew[d.Server] = clockReading{skew: skew, at: end}
}

// readings returns the recent comparisons, by server ID.
func (c *clockWatch) readings() []alerts.Clock {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []alerts.Clock
	for srv, r := range c.mu.skew {
		if time.Since(r.at) > clockStale {
			delete(c.mu.skew, srv)
			continue
		}
		out = append(out, alerts.Clock{Subject: "server " + srv, Skew: r.skew})
	}
	slices.SortFunc(out, func(a, b alerts.Clock) int {
		if a.Subject < b.Subject {
			return -1
		}
		if a.Subject > b.Subject {
			return 1
		}
		return 0
	})
	return out
}
