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

// clockWatch keeps the last clock comparison with each storage server and
// mount. A storage server puts its clock in its answers to storage.Stat
// (chunkstore.Usage.ServerTime); the failure detector's probe compares it
// with the midpoint of its own clock's send and receive times, so the
// reading is right to within half the round trip. A mount puts its clock
// in its periodic I/O report (iostats.Report.Sent), compared with the
// time the report arrived.
type clockWatch struct {
	mu struct {
		sync.Mutex
		skew map[string]clockReading // by subject: "server s0", "mount host:/mnt"
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
	c.set("server "+d.Server, time.Unix(0, u.ServerTime).Sub(mid), end)
}

// recordSent notes the clock of a peer that put it in a one-way report
// (a mount's I/O report, iostats.Report.Sent) received at recv: the
// reading is late by the message's transit. sent 0 (an older client) is
// ignored.
func (c *clockWatch) recordSent(subject string, sent int64, recv time.Time) {
	if sent == 0 {
		return
	}
	c.set(subject, time.Unix(0, sent).Sub(recv), recv)
}

func (c *clockWatch) set(subject string, skew time.Duration, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.skew == nil {
		c.mu.skew = map[string]clockReading{}
	}
	c.mu.skew[subject] = clockReading{skew: skew, at: at}
}

// readings returns the recent comparisons, by server ID.
func (c *clockWatch) readings() []alerts.Clock {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []alerts.Clock
	for subj, r := range c.mu.skew {
		if time.Since(r.at) > clockStale {
			delete(c.mu.skew, subj) // the peer stopped answering or reporting
			continue
		}
		out = append(out, alerts.Clock{Subject: subj, Skew: r.skew})
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
