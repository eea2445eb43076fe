package mgmt

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"

	"poolfs/internal/meta"
	"poolfs/internal/placement"
	"poolfs/internal/rpc"
)

// EventReadRepair is logged when clients report fragments they found
// damaged or missing while reading and rewrote from parity (read repair),
// once per drive and report.
const EventReadRepair = "read.repair"

// repairArgs is the argument of mgmt.ReadRepairs: fragments rewritten by
// read repair, per drive.
type repairArgs struct {
	Drives map[placement.DriveID]int64 `json:"drives"`
}

// ReadRepaired records fragments that a client rewrote by read repair,
// per drive: they count in the status (RebuildStatus.ReadRepairs) and are
// logged as read.repair events.
func (s *Service) ReadRepaired(ctx context.Context, perDrive map[placement.DriveID]int64) error {
	ids := make([]placement.DriveID, 0, len(perDrive))
	var sum int64
	for id, n := range perDrive {
		if n > 0 {
			sum += n
			ids = append(ids, id)
		}
	}
	s.rb.ReadRepaired(sum)
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		s.event(ctx, EventReadRepair, id.String(),
			fmt.Sprintf("%d fragments found damaged or missing by a reader and rewritten from parity", perDrive[id]), 0)
	}
	return nil
}

// RepairSink is where read repairs are reported: the Service itself, or a
// Client of it.
type RepairSink interface {
	ReadRepaired(ctx context.Context, perDrive map[placement.DriveID]int64) error
}

var (
	_ RepairSink = (*Service)(nil)
	_ RepairSink = (*Client)(nil)
)

// ReadRepaired reports fragments this client rewrote by read repair.
func (c *Client) ReadRepaired(ctx context.Context, perDrive map[placement.DriveID]int64) error {
	return c.rc.Call(ctx, "mgmt.ReadRepairs", repairArgs{Drives: perDrive}, nil, nil)
}

func (s *Service) registerRepairs(r Handler) {
	r.Handle("mgmt.ReadRepairs", func(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
		var a repairArgs
		if err := json.Unmarshal(req.Args, &a); err != nil {
			return nil, fmt.Errorf("%w: bad arguments: %v", meta.ErrInvalid, err)
		}
		return &rpc.Response{}, s.ReadRepaired(ctx, a.Drives)
	})
}

// RepairBatcher collects the read repairs of a client and reports them to
// the management service in batches: the first repair after a quiet spell
// starts a timer, and everything repaired until it fires goes in one call.
// A report that fails is dropped (the repairs are logged by the client).
type RepairBatcher struct {
	sink     RepairSink
	interval time.Duration
	mu       struct {
		sync.Mutex
		pending map[placement.DriveID]int64
		timer   *time.Timer // armed while pending is not empty
	}
}

// NewRepairBatcher returns a batcher reporting to sink at most once per
// interval.
func NewRepairBatcher(sink RepairSink, interval time.Duration) *RepairBatcher {
	return &RepairBatcher{sink: sink, interval: interval}
}

// Repaired counts one fragment rewritten on drive id (client.Options.OnRepair).
func (b *RepairBatcher) Repaired(id placement.DriveID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mu.pending == nil {
		b.mu.pending = map[placement.DriveID]int64{}
	}
	b.mu.pending[id]++
	if b.mu.timer == nil {
		b.mu.timer = time.AfterFunc(b.interval, func() { _ = b.Flush(context.Background()) })
	}
}

// Flush reports what is pending now (the connection's Close calls it).
func (b *RepairBatcher) Flush(ctx context.Context) error {
	b.mu.Lock()
	pending := b.mu.pending
	b.mu.pending = nil
	if b.mu.timer != nil {
		b.mu.timer.Stop()
		b.mu.timer = nil
	}
	b.mu.Unlock()
	if len(pending) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, reportTimeout)
	defer cancel()
	return b.sink.ReadRepaired(ctx, pending)
}
