package mgmt

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"poolfs/internal/chunkstore"
	"poolfs/internal/client"
	"poolfs/internal/clustermap"
	"poolfs/internal/erasure"
	"poolfs/internal/placement"
	"poolfs/internal/rpc"
)

// Reporter is told about drives that do not answer (a *Client is one).
type Reporter interface {
	DriveUnreachable(ctx context.Context, id placement.DriveID) error
}

// reportTimeout bounds a report: the failing call waits for it so that the
// client's next map fetch already places stripes around the drive.
const reportTimeout = 10 * time.Second

// ReportingDrives wraps the drives a client uses so that the failure
// detector hears of a drive that does not answer as soon as a client does:
//
//   - an operation that fails because the drive is unreachable (its storage
//     server does not answer, or the drive is offline) or failed
//     (chunkstore.ErrFailed: I/O errors, its directory gone) is reported to
//     rep, which probes the drive and marks it down or failed, before the
//     error returns; one report per drive is in flight at a time, the
//     others wait for it;
//   - that error then wraps rpc.ErrUnavailable (or ErrFailed), which the
//     client treats as a drive gone: it fetches the new map and writes the
//     stripe again, around the drive, so writes carry on without error;
//   - a drive the map already says is down is not contacted, but to read:
//     its other operations fail at once. Readers ask a down drive last,
//     only when the stripe cannot be read without it (client.readStripe),
//     and such a read is bounded by downReadTimeout and not reported (the
//     drive is down already): a down drive has lost nothing, and data
//     that can still be read is not refused.
func ReportingDrives(inner client.Drives, rep Reporter) client.Drives {
	r := &reporting{inner: inner, rep: rep}
	r.mu.inflight = map[placement.DriveID]chan struct{}{}
	return r
}

type reporting struct {
	inner client.Drives
	rep   Reporter
	mu    struct {
		sync.Mutex
		inflight map[placement.DriveID]chan struct{} // closed when the report ends
	}
}

func (r *reporting) Drive(m *clustermap.Map, id placement.DriveID) (chunkstore.Drive, error) {
	if d, err := m.Drive(id); err == nil && d.State == clustermap.StateDown {
		inner, _ := r.inner.Drive(m, id) // nil: reads fail at once too
		return downDrive{id: id, epoch: m.Epoch, inner: inner}, nil
	}
	drv, err := r.inner.Drive(m, id)
	if err != nil {
		return nil, r.check(id, err)
	}
	return &reportingDrive{d: drv, id: id, r: r}, nil
}

// check reports id if err says it is unreachable or failed. An unreachable
// drive's error is returned marked as rpc.ErrUnavailable; other errors pass
// unchanged (a failed drive's wrap chunkstore.ErrFailed already, which the
// client also treats as a drive gone).
func (r *reporting) check(id placement.DriveID, err error) error {
	if err == nil {
		return err
	}
	failed := errors.Is(err, chunkstore.ErrFailed)
	if !failed && !unreachable(err) {
		return err
	}
	r.mu.Lock()
	ch, busy := r.mu.inflight[id]
	if !busy {
		ch = make(chan struct{})
		r.mu.inflight[id] = ch
	}
	r.mu.Unlock()
	if busy {
		<-ch
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), reportTimeout)
		_ = r.rep.DriveUnreachable(ctx, id) // best effort: the error below is what counts
		cancel()
		r.mu.Lock()
		delete(r.mu.inflight, id)
		r.mu.Unlock()
		close(ch)
	}
	if failed {
		return err
	}
	return fmt.Errorf("drive %v unreachable: %w (%w)", id, rpc.ErrUnavailable, err)
}

type reportingDrive struct {
	d  chunkstore.Drive
	id placement.DriveID
	r  *reporting
}

func (d *reportingDrive) WriteFragment(ctx context.Context, key erasure.FragmentKey, frag []byte) error {
	return d.r.check(d.id, d.d.WriteFragment(ctx, key, frag))
}

func (d *reportingDrive) ReadFragment(ctx context.Context, key erasure.FragmentKey, off, n int64, dst []byte) ([]byte, error) {
	b, err := d.d.ReadFragment(ctx, key, off, n, dst)
	return b, d.r.check(d.id, err)
}

func (d *reportingDrive) DeleteFragment(ctx context.Context, key erasure.FragmentKey) error {
	return d.r.check(d.id, d.d.DeleteFragment(ctx, key))
}

func (d *reportingDrive) ListFragments(ctx context.Context, fn func(key erasure.FragmentKey, size int64, mtime time.Time) error) error {
	return d.r.check(d.id, d.d.ListFragments(ctx, fn))
}

func (d *reportingDrive) Stat(ctx context.Context) (chunkstore.Usage, error) {
	u, err := d.d.Stat(ctx)
	return u, d.r.check(d.id, err)
}

func (d *reportingDrive) Sync(ctx context.Context) error {
	return d.r.check(d.id, d.d.Sync(ctx))
}

// downReadTimeout bounds a read of a drive the map says is down: it may
// well not answer.
const downReadTimeout = 2 * time.Second

// downDrive is a drive the map says is down: every call but a read fails
// at once; a read is tried, for at most downReadTimeout.
type downDrive struct {
	id    placement.DriveID
	epoch uint64
	inner chunkstore.Drive // nil: not reachable at all
}

func (d downDrive) err() error {
	return fmt.Errorf("drive %v is down at map epoch %d: %w: %w", d.id, d.epoch, rpc.ErrUnavailable, chunkstore.ErrOffline)
}

func (d downDrive) WriteFragment(context.Context, erasure.FragmentKey, []byte) error { return d.err() }

func (d downDrive) ReadFragment(ctx context.Context, key erasure.FragmentKey, off, n int64, buf []byte) ([]byte, error) {
	if d.inner == nil {
		return nil, d.err()
	}
	ctx, cancel := context.WithTimeout(ctx, downReadTimeout)
	defer cancel()
	b, err := d.inner.ReadFragment(ctx, key, off, n, buf)
	if err != nil && (unreachable(err) || errors.Is(err, context.DeadlineExceeded)) {
		return nil, fmt.Errorf("%w (%v)", d.err(), err)
	}
	return b, err
}

func (d downDrive) DeleteFragment(context.Context, erasure.FragmentKey) error { return d.err() }

func (d downDrive) ListFragments(context.Context, func(erasure.FragmentKey, int64, time.Time) error) error {
	return d.err()
}

func (d downDrive) Sync(context.Context) error { return d.err() }

func (d downDrive) Stat(context.Context) (chunkstore.Usage, error) {
	return chunkstore.Usage{}, d.err()
}

var (
	_ chunkstore.Drive = (*reportingDrive)(nil)
	_ chunkstore.Drive = downDrive{}
)

var _ chunkstore.InProcess = (*reportingDrive)(nil)

// InProcess is the wrapped drive's.
func (d *reportingDrive) InProcess() bool { return chunkstore.IsInProcess(d.d) }
