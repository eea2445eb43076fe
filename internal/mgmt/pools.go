package mgmt

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"poolfs/internal/clustermap"
	"poolfs/internal/meta"
	"poolfs/internal/placement"
)

// PoolSpec describes a new pool of new emulated drives.
type PoolSpec struct {
	Name         string           `json:"name"`
	Drives       int              `json:"drives"`
	K            int              `json:"k"`
	M            int              `json:"m"`
	Unit         uint32           `json:"unit"`
	DriveSize    int64            `json:"drive_size"`
	Preservation int              `json:"preservation"` // -1: the default for the pool size
	Layout       placement.Layout `json:"layout"`
	Server       string           `json:"server"` // storage server that gets the drives
	// Force creates the pool even if its drives advertise more than the
	// host file system holding the server's drives has free.
	Force bool `json:"force,omitempty"`
	// Request is the call's id (requests.go): a repeated id gets the
	// first call's answer.
	Request string `json:"request,omitempty"`
}

// Validate rejects specs that cannot make a pool.
func (s PoolSpec) Validate() error {
	switch {
	case s.Name == "" || len(s.Name) > 64:
		return fmt.Errorf("%w: pool name %q: 1 to 64 characters", meta.ErrInvalid, s.Name)
	case s.K < 1 || s.M < 0 || s.K+s.M > 64:
		return fmt.Errorf("%w: scheme %d+%d", meta.ErrInvalid, s.K, s.M)
	case s.Drives < s.K+s.M+1 || s.Drives > 1000:
		return fmt.Errorf("%w: %d drives for %d+%d: need %d to 1000", meta.ErrInvalid, s.Drives, s.K, s.M, s.K+s.M+1)
	case s.Unit < 4096 || s.Unit%4096 != 0 || s.Unit > 16<<20:
		return fmt.Errorf("%w: stripe unit %d", meta.ErrInvalid, s.Unit)
	case s.DriveSize < 1<<20:
		return fmt.Errorf("%w: drive size %d: at least 1 MiB", meta.ErrInvalid, s.DriveSize)
	case s.Preservation >= s.Drives-s.K-s.M+1:
		return fmt.Errorf("%w: preservation %d leaves fewer than %d drives", meta.ErrInvalid, s.Preservation, s.K+s.M)
	}
	return nil
}

// CreatePool adds a pool of new drives to the map, sets its capacity limit
// in the metadata store and returns the new map. The storage server learns
// of its new drives through the map (OnMapChange in an embedded cluster).
func (s *Service) CreatePool(ctx context.Context, spec PoolSpec) (*clustermap.Map, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if spec.Preservation < 0 {
		spec.Preservation = clustermap.DefaultPreservation(spec.Drives)
	}
	if !spec.Force {
		if err := s.checkHostRoom(ctx, spec); err != nil {
			return nil, err
		}
	}
	var poolID uint32
	m, err := s.Update(ctx, func(m *clustermap.Map) error {
		if _, err := m.PoolByName(spec.Name); err == nil {
			return fmt.Errorf("%w: pool %q", meta.ErrExist, spec.Name)
		}
		if spec.Server == "" && len(m.Servers) > 0 {
			spec.Server = m.Servers[0].ID
		}
		next := placement.DriveID(0)
		for _, d := range m.Drives {
			next = max(next, d.ID+1)
		}
		for _, p := range m.Pools {
			poolID = max(poolID, p.ID+1)
		}
		pool := clustermap.Pool{ID: poolID, Name: spec.Name, K: spec.K, M: spec.M, Unit: spec.Unit,
			PGs: placement.DefaultPGs(spec.Drives, spec.K+spec.M), Layout: spec.Layout, Preservation: spec.Preservation}
		for i := 0; i < spec.Drives; i++ {
			id := next + placement.DriveID(i)
			m.Drives = append(m.Drives, clustermap.Drive{ID: id, Server: spec.Server,
				Path: filepath.Join("drives", id.String()), Capacity: spec.DriveSize, State: clustermap.StateUp, Pool: poolID})
			pool.Drives = append(pool.Drives, id)
		}
		m.Pools = append(m.Pools, pool)
		return nil
	})
	if err != nil {
		return nil, err
	}
	capa, err := m.PoolCapacity(poolID)
	if err != nil {
		return nil, err
	}
	if err := s.store.SetPoolLimit(ctx, poolID, uint64(capa.UsableRaw)); err != nil {
		return nil, err
	}
	return m, nil
}

// ErrHostSpace is returned when new drives would advertise more than the
// host holding them has free.
var ErrHostSpace = errors.New("mgmt: not enough space on the host")

// checkHostRoom refuses a pool whose drives advertise more than the host
// file system of the server that gets them has free, as a drive of that
// server reports it. A server with no drive yet is not checked.
func (s *Service) checkHostRoom(ctx context.Context, spec PoolSpec) error {
	m, err := s.Map(ctx)
	if err != nil {
		return err
	}
	server := spec.Server
	if server == "" && len(m.Servers) > 0 {
		server = m.Servers[0].ID
	}
	for _, d := range m.Drives {
		if d.Server != server || d.State != clustermap.StateUp {
			continue
		}
		drv, err := s.drives.Drive(m, d.ID)
		if err != nil {
			continue
		}
		u, err := drv.Stat(ctx)
		if err != nil || u.HostFree == 0 {
			continue
		}
		if need := int64(spec.Drives) * spec.DriveSize; need > u.HostFree {
			return fmt.Errorf("%w: pool %q: %d drives of %s advertise %s, the file system holding server %s's drives has %s free; "+
				"use smaller drives (--drive-size) or --force to create them anyway",
				ErrHostSpace, spec.Name, spec.Drives, human(spec.DriveSize), human(need), server, human(u.HostFree))
		}
		return nil
	}
	return nil
}

func (s *Service) registerPools(r Handler) {
	handleJSON(r, "mgmt.CreatePool", func(ctx context.Context, spec PoolSpec) (any, error) {
		return s.once(ctx, "mgmt.CreatePool", spec.Request, func() (any, error) { return s.CreatePool(ctx, spec) })
	})
}

// CreatePool asks the management service for a new pool.
func (c *Client) CreatePool(ctx context.Context, spec PoolSpec) (*clustermap.Map, error) {
	var m clustermap.Map
	spec.Request = newRequestID()
	if err := c.rc.Call(ctx, "mgmt.CreatePool", spec, nil, &m); err != nil {
		return nil, err
	}
	return &m, nil
}
