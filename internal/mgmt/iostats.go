package mgmt

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"poolfs/internal/iostats"
	"poolfs/internal/meta"
	"poolfs/internal/rpc"
)

// IOStatsSnapshot is the recent I/O of every client and of the busiest
// jobs: rates and latency percentiles over the last window (10 s), totals
// since each was first seen (iostats.Snapshot).
type IOStatsSnapshot = iostats.Snapshot

// DefaultTopJobs is the number of jobs IOStats returns, and the jobs that
// have Prometheus series: the busiest ones, so that the number of series
// stays bounded however many jobs run.
const DefaultTopJobs = 20

// ioState holds the clients' reports (see ReportIO).
type ioState struct {
	once sync.Once
	mu   sync.Mutex // guards agg
	agg  *iostats.Aggregator
}

func (s *Service) ioAgg() *iostats.Aggregator {
	s.io.once.Do(func() {
		agg, err := iostats.NewAggregator(iostats.Config{})
		if err != nil {
			panic(err) // the default configuration is valid
		}
		s.io.agg = agg
	})
	return s.io.agg
}

// ReportIO counts a client's report of its operations per job (the mount
// sends one every few seconds; an in-process mount calls this directly).
func (s *Service) ReportIO(r *iostats.Report) {
	s.clocks.recordSent("mount "+r.Client(), r.Sent, time.Now()) // alerts_clock.go
	agg := s.ioAgg()
	s.io.mu.Lock()
	defer s.io.mu.Unlock()
	agg.Add(time.Now(), r)
}

// IOStats returns every client's and the DefaultTopJobs busiest jobs'
// recent I/O, busiest first. The caller owns the result.
func (s *Service) IOStats() IOStatsSnapshot { return s.IOStatsTop(DefaultTopJobs) }

// IOStatsTop is IOStats with the top jobs busiest jobs (all if top ≤ 0).
func (s *Service) IOStatsTop(top int) IOStatsSnapshot {
	agg := s.ioAgg()
	s.io.mu.Lock()
	defer s.io.mu.Unlock()
	return agg.Snapshot(time.Now(), top)
}

// IOStatsArgs are the arguments of mgmt.IOStats.
type IOStatsArgs struct {
	Top int `json:"top"` // busiest jobs to return; ≤ 0: all
}

func (s *Service) registerIOStats(r Handler) {
	r.Handle("mgmt.IOReport", func(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
		rep, err := iostats.DecodeReport(req.Args)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", meta.ErrInvalid, err)
		}
		s.ReportIO(rep)
		return &rpc.Response{}, nil
	})
	r.Handle("mgmt.IOStats", func(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
		var a IOStatsArgs
		if len(req.Args) > 0 {
			if err := json.Unmarshal(req.Args, &a); err != nil {
				return nil, fmt.Errorf("%w: bad arguments: %v", meta.ErrInvalid, err)
			}
		}
		snap := s.IOStatsTop(a.Top)
		return &rpc.Response{Result: &snap}, nil
	})
}

// ReportIO sends a client's report of its operations (an iostats.Sender).
func (c *Client) ReportIO(ctx context.Context, r *iostats.Report) error {
	b, err := r.Encode()
	if err != nil {
		return err
	}
	return c.rc.Call(ctx, "mgmt.IOReport", json.RawMessage(b), nil, nil)
}

// IOStats returns the clients' and the top busiest jobs' recent I/O (all
// jobs if top ≤ 0).
func (c *Client) IOStats(ctx context.Context, top int) (*IOStatsSnapshot, error) {
	var snap IOStatsSnapshot
	if err := c.rc.Call(ctx, "mgmt.IOStats", IOStatsArgs{Top: top}, nil, &snap); err != nil {
		return nil, err
	}
	return &snap, nil
}
