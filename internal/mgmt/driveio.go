package mgmt

import (
	"context"

	"poolfs/internal/clustermap"
	"poolfs/internal/rpc"
)

// DriveIO reports the I/O counters of every drive that is up (DriveStatus
// with Reads, ReadBytes, Written and Writes filled in, and Latency), for
// samplers that turn two readings into rates each second: unlike Status it
// neither reads the metadata store nor asks the coordinator for a scan.
// A drive that does not answer within a second has Error set.
func (s *Service) DriveIO(ctx context.Context) ([]DriveStatus, error) {
	m, err := s.Map(ctx)
	if err != nil {
		return nil, err
	}
	var (
		inMap []*clustermap.Drive
		ds    []DriveStatus
		ask   []int
	)
	for i := range m.Drives {
		d := &m.Drives[i]
		if d.State != clustermap.StateUp {
			continue
		}
		ask = append(ask, len(inMap))
		inMap = append(inMap, d)
		ds = append(ds, DriveStatus{ID: d.ID.String(), Server: d.Server, State: d.State, Capacity: d.Capacity,
			pool: d.Pool, Latency: s.slow.Latency(d.ID)})
	}
	s.askDrives(ctx, m, inMap, ds, ask)
	return ds, nil
}

func (s *Service) registerDriveIO(r Handler) {
	r.Handle("mgmt.StatusQuiet", func(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
		st, err := s.status(ctx, false)
		if err != nil {
			return nil, err
		}
		return &rpc.Response{Result: st}, nil
	})
	r.Handle("mgmt.DriveIO", func(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
		ds, err := s.DriveIO(ctx)
		if err != nil {
			return nil, err
		}
		return &rpc.Response{Result: ds}, nil
	})
}

// DriveIO returns the I/O counters of the drives that are up.
func (c *Client) DriveIO(ctx context.Context) ([]DriveStatus, error) {
	var out []DriveStatus
	err := c.rc.Call(ctx, "mgmt.DriveIO", struct{}{}, nil, &out)
	return out, err
}

// StatusOf returns the cluster status; with rescan false it never asks the
// coordinator for a fresh scan of the stripes (a page that refreshes itself
// every few seconds takes the counts as they are: the coordinator rescans
// when a drive changes state, and every rebuild interval), with rescan true
// it is Status.
func (c *Client) StatusOf(ctx context.Context, rescan bool) (*Status, error) {
	if rescan {
		return c.Status(ctx)
	}
	var st Status
	if err := c.rc.Call(ctx, "mgmt.StatusQuiet", struct{}{}, nil, &st); err != nil {
		return nil, err
	}
	return &st, nil
}
