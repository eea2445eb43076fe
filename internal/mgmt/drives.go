package mgmt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"poolfs/internal/clustermap"
	"poolfs/internal/meta"
	"poolfs/internal/mgmt/rebuild"
	"poolfs/internal/placement"
	"poolfs/internal/rpc"
	"poolfs/internal/storage"
)

// Event kinds written by the management service.
const (
	EventDriveFailed   = "drive.failed"
	EventDriveAdded    = "drive.added"
	EventDriveReplaced = "drive.replaced"
	EventRebuildStart  = rebuild.EventStart
	EventRebuildDone   = rebuild.EventDone
	// EventRebuildIncomplete: recovery cannot restore every stripe (too
	// few drives, no free drive in a placement group, tasks failing, data
	// lost); the message says why.
	EventRebuildIncomplete = rebuild.EventIncomplete
	EventRebalance         = rebuild.EventRebalance
	EventRebalanceDone     = rebuild.EventRebalanceDone
	EventDataLost          = "data.lost"
	EventPriority          = "pool.rebuild-priority"
	EventScrubStart        = "scrub.start"
	EventScrubDone         = "scrub.done"
)

// Servers reaches whole storage servers (a *storage.Dialer does): the
// rebuild coordinator runs reconstruct tasks on them and fault injection
// goes through them.
type Servers interface {
	Server(m *clustermap.Map, id placement.DriveID) (*storage.ServerClient, error)
}

var _ Servers = (*storage.Dialer)(nil)

func (s *Service) event(ctx context.Context, kind, subject, msg string, dur time.Duration) {
	if err := s.store.AppendEvent(ctx, meta.Event{Kind: kind, Subject: subject, Message: msg, Duration: int64(dur)}); err != nil {
		s.log.Warn("append event", "kind", kind, "err", err)
	}
	s.log.Info("event", "kind", kind, "subject", subject, "msg", msg)
}

// FailDrive declares drive id failed in a new map epoch: it receives no
// new fragments, and the rebuild coordinator reconstructs what it held.
// An already failed or removed drive is left as it is (nil error).
func (s *Service) FailDrive(ctx context.Context, id placement.DriveID, reason string) error {
	m, changed, err := s.setState(ctx, id, []clustermap.DriveState{clustermap.StateUp, clustermap.StateDown,
		clustermap.StateRebuilding}, clustermap.StateFailed)
	if err != nil {
		return fmt.Errorf("fail drive %v: %w", id, err)
	}
	if !changed {
		return nil
	}
	s.event(ctx, EventDriveFailed, id.String(), fmt.Sprintf("%s; map epoch %d", reason, m.Epoch), 0)
	s.kickRebuild()
	return nil
}

// errUnchanged aborts an Update that has nothing to do.
var errUnchanged = errors.New("mgmt: unchanged")

// AddDrive adds a new empty drive to a pool, like its other drives (server,
// capacity, speed model); rebalancing then moves about 1/N of the data
// onto it. It returns the new drive's ID.
func (s *Service) AddDrive(ctx context.Context, poolID uint32) (placement.DriveID, error) {
	id, err := s.addDrive(ctx, poolID, nil)
	if err != nil {
		return 0, err
	}
	s.event(ctx, EventDriveAdded, id.String(), fmt.Sprintf("added to pool %d", poolID), 0)
	s.kickRebuild()
	return id, nil
}

// ReplaceDrive takes failed (or any) drive old out of its pool and adds a
// new drive in its place (same server, capacity, domain and model). The
// old drive's data is rebuilt if it was not yet, and rebalancing fills the
// new one. It returns the new drive's ID.
func (s *Service) ReplaceDrive(ctx context.Context, old placement.DriveID) (placement.DriveID, error) {
	m, err := s.Map(ctx)
	if err != nil {
		return 0, err
	}
	d, err := m.Drive(old)
	if err != nil {
		return 0, err
	}
	id, err := s.addDrive(ctx, d.Pool, &old)
	if err != nil {
		return 0, err
	}
	if dr, err := s.Map(ctx); err == nil {
		s.injectFault(ctx, dr, old, "fail")
	}
	s.event(ctx, EventDriveReplaced, old.String(), fmt.Sprintf("replaced by %v", id), 0)
	s.kickRebuild()
	return id, nil
}

func (s *Service) addDrive(ctx context.Context, poolID uint32, replace *placement.DriveID) (placement.DriveID, error) {
	var id placement.DriveID
	_, err := s.Update(ctx, func(m *clustermap.Map) error {
		p, err := m.Pool(poolID)
		if err != nil {
			return err
		}
		if len(p.Drives) == 0 {
			return fmt.Errorf("%w: pool %d has no drives", clustermap.ErrInvalid, poolID)
		}
		tmpl, err := m.Drive(p.Drives[len(p.Drives)-1])
		if err != nil {
			return err
		}
		if replace != nil {
			old, err := m.Drive(*replace)
			if err != nil {
				return err
			}
			if old.Pool != poolID {
				return fmt.Errorf("%w: drive %v is not in pool %d", clustermap.ErrInvalid, *replace, poolID)
			}
			tmpl = old
		}
		nd := *tmpl
		nd.Domain = append([]string(nil), tmpl.Domain...)
		id = 0
		for _, d := range m.Drives {
			id = max(id, d.ID+1)
		}
		nd.ID, nd.State, nd.Path = id, clustermap.StateUp, filepath.Join("drives", id.String())
		if replace != nil {
			old, _ := m.Drive(*replace)
			old.State, old.DownSince = clustermap.StateOut, 0
		}
		m.Drives = append(m.Drives, nd)
		p.Drives = append(p.Drives, id)
		if p.Layout == placement.Grouped {
			// A new drive of a grouped pool (it has the highest ID) becomes
			// one more hot spare, so the groups do not shift.
			p.Preservation++
		}
		return nil
	})
	return id, err
}

// SetRebuildPriority sets a pool's rebuild priority; a running rebuild
// picks it up within a second.
func (s *Service) SetRebuildPriority(ctx context.Context, pool string, prio string) error {
	if _, err := clustermap.ParsePriority(prio); err != nil {
		return err
	}
	_, err := s.Update(ctx, func(m *clustermap.Map) error {
		p, err := m.PoolByName(pool)
		if err != nil {
			return err
		}
		p.RebuildPriority = prio
		return nil
	})
	if err == nil {
		s.event(ctx, EventPriority, "pool/"+pool, prio, 0)
	}
	return err
}

// DriveFault injects a fault into a drive through its storage server
// (emulation): fail, heal, offline, online, corrupt (Fraction of reads),
// slow (Delay). After offline and online the failure detector probes the
// drive at once, so the drive is down (or up again) when DriveFault returns.
func (s *Service) DriveFault(ctx context.Context, a storage.FaultArgs) error {
	m, err := s.Map(ctx)
	if err != nil {
		return err
	}
	if s.servers == nil {
		return fmt.Errorf("mgmt: cannot reach storage servers for fault injection")
	}
	sc, err := s.servers.Server(m, a.Drive)
	if err != nil {
		return err
	}
	if err := sc.Fault(ctx, a); err != nil {
		return err
	}
	if a.Op == "offline" || a.Op == "online" {
		s.checkDrive(ctx, m, a.Drive)
	}
	return nil
}

// injectFault is DriveFault without an error: the emulated drive of a
// drive declared failed or replaced stops answering, as a real one would.
func (s *Service) injectFault(ctx context.Context, m *clustermap.Map, id placement.DriveID, op string) {
	if err := s.DriveFault(ctx, storage.FaultArgs{Drive: id, Op: op}); err != nil {
		s.log.Debug("inject fault", "drive", id.String(), "err", err)
	}
	_ = m
}

// DriveArgs names a drive or a pool in drive RPCs.
type DriveArgs struct {
	Drive  placement.DriveID `json:"drive"`
	Pool   string            `json:"pool,omitempty"`
	Reason string            `json:"reason,omitempty"`
	Value  string            `json:"value,omitempty"`
	// Request is the call's id (requests.go): a repeated id gets the
	// first call's answer.
	Request string `json:"request,omitempty"`
}

// addDriveTo adds a drive to the pool named pool ("": the first).
func (s *Service) addDriveTo(ctx context.Context, pool string) (placement.DriveID, error) {
	m, err := s.Map(ctx)
	if err != nil {
		return 0, err
	}
	if len(m.Pools) == 0 {
		return 0, fmt.Errorf("%w: no pool", clustermap.ErrNoPool)
	}
	p := &m.Pools[0]
	if pool != "" {
		if p, err = m.PoolByName(pool); err != nil {
			return 0, err
		}
	}
	return s.AddDrive(ctx, p.ID)
}

func (s *Service) registerDrives(r Handler) {
	handleJSON(r, "mgmt.FailDrive", func(ctx context.Context, a DriveArgs) (any, error) {
		if a.Reason == "" {
			a.Reason = "failed by operator"
		}
		m, err := s.Map(ctx)
		if err != nil {
			return nil, err
		}
		if _, err := m.Drive(a.Drive); err != nil {
			return nil, err
		}
		s.injectFault(ctx, m, a.Drive, "fail")
		return nil, s.FailDrive(ctx, a.Drive, a.Reason)
	})
	handleJSON(r, "mgmt.ReplaceDrive", func(ctx context.Context, a DriveArgs) (any, error) {
		return s.once(ctx, "mgmt.ReplaceDrive", a.Request, func() (any, error) { return s.ReplaceDrive(ctx, a.Drive) })
	})
	handleJSON(r, "mgmt.AddDrive", func(ctx context.Context, a DriveArgs) (any, error) {
		return s.once(ctx, "mgmt.AddDrive", a.Request, func() (any, error) { return s.addDriveTo(ctx, a.Pool) })
	})
	handleJSON(r, "mgmt.SetRebuildPriority", func(ctx context.Context, a DriveArgs) (any, error) {
		return nil, s.SetRebuildPriority(ctx, a.Pool, a.Value)
	})
	handleJSON(r, "mgmt.SetSmallFileThreshold", s.handleSmallFileThreshold) // smallfile.go
	r.Handle("mgmt.DriveFault", func(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
		var a storage.FaultArgs
		if err := json.Unmarshal(req.Args, &a); err != nil {
			return nil, fmt.Errorf("%w: bad arguments: %v", meta.ErrInvalid, err)
		}
		return &rpc.Response{}, s.DriveFault(ctx, a)
	})
	r.Handle("mgmt.Events", func(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
		var a struct {
			After uint64 `json:"after"`
			Limit int    `json:"limit"`
		}
		if err := json.Unmarshal(req.Args, &a); err != nil {
			return nil, fmt.Errorf("%w: bad arguments: %v", meta.ErrInvalid, err)
		}
		evs, err := s.store.Events(ctx, a.After, a.Limit)
		if err != nil {
			return nil, err
		}
		return &rpc.Response{Result: evs}, nil
	})
}

// FailDrive declares a drive failed.
func (c *Client) FailDrive(ctx context.Context, id placement.DriveID) error {
	return c.rc.Call(ctx, "mgmt.FailDrive", DriveArgs{Drive: id}, nil, nil)
}

// ReplaceDrive replaces a drive by a new one and returns its ID.
func (c *Client) ReplaceDrive(ctx context.Context, id placement.DriveID) (placement.DriveID, error) {
	var out placement.DriveID
	err := c.rc.Call(ctx, "mgmt.ReplaceDrive", DriveArgs{Drive: id, Request: newRequestID()}, nil, &out)
	return out, err
}

// AddDrive adds a drive to a pool ("" = the first) and returns its ID.
func (c *Client) AddDrive(ctx context.Context, pool string) (placement.DriveID, error) {
	var out placement.DriveID
	err := c.rc.Call(ctx, "mgmt.AddDrive", DriveArgs{Pool: pool, Request: newRequestID()}, nil, &out)
	return out, err
}

// SetRebuildPriority sets a pool's rebuild priority.
func (c *Client) SetRebuildPriority(ctx context.Context, pool, prio string) error {
	return c.rc.Call(ctx, "mgmt.SetRebuildPriority", DriveArgs{Pool: pool, Value: prio}, nil, nil)
}

// DriveFault injects a fault into a drive (emulation).
func (c *Client) DriveFault(ctx context.Context, a storage.FaultArgs) error {
	return c.rc.Call(ctx, "mgmt.DriveFault", a, nil, nil)
}

// Events returns up to limit events after sequence number after.
func (c *Client) Events(ctx context.Context, after uint64, limit int) ([]meta.Event, error) {
	var out []meta.Event
	err := c.rc.Call(ctx, "mgmt.Events", map[string]any{"after": after, "limit": limit}, nil, &out)
	return out, err
}
