package mgmt

import (
	"context"
	"fmt"
	"strconv"

	"poolfs/internal/clustermap"
)

// EventSmallFile is logged when a pool's small-file threshold changes.
const EventSmallFile = "pool.small-file-threshold"

// SetSmallFileThreshold sets the size up to which a pool's files are
// mirrored rather than erasure-coded (0 turns mirroring of small files
// off). It applies to stripes written from the next map epoch on; stripes
// already written keep their scheme until they are rewritten.
func (s *Service) SetSmallFileThreshold(ctx context.Context, pool string, n int64) error {
	if err := clustermap.ValidateSmallFileThreshold(n); err != nil {
		return err
	}
	_, err := s.Update(ctx, func(m *clustermap.Map) error {
		p, err := m.PoolByName(pool)
		if err != nil {
			return err
		}
		p.SmallFileThreshold = &n // a new pointer: maps share the old one
		return nil
	})
	if err == nil {
		s.event(ctx, EventSmallFile, "pool/"+pool, strconv.FormatInt(n, 10), 0)
	}
	return err
}

func (s *Service) handleSmallFileThreshold(ctx context.Context, a DriveArgs) (any, error) {
	n, err := strconv.ParseInt(a.Value, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("%w: small-file threshold %q", clustermap.ErrInvalid, a.Value)
	}
	return nil, s.SetSmallFileThreshold(ctx, a.Pool, n)
}

// SetSmallFileThreshold sets a pool's small-file threshold in bytes.
func (c *Client) SetSmallFileThreshold(ctx context.Context, pool string, n int64) error {
	return c.rc.Call(ctx, "mgmt.SetSmallFileThreshold", DriveArgs{Pool: pool, Value: strconv.FormatInt(n, 10)}, nil, nil)
}
