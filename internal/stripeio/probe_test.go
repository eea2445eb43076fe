package stripeio

import (
	"context"
	"slices"
	"testing"
	"time"

	"poolfs/internal/chunkstore/drivetest"
	"poolfs/internal/placement"
)

// timedHedge is a Hedger that never finds a read late within a test and
// records every observation with its duration.
type timedHedge struct{ seen chan observed }

type observed struct {
	id placement.DriveID
	d  time.Duration
}

func (h *timedHedge) Bound(placement.DriveID) time.Duration { return time.Hour }
func (h *timedHedge) Hedge() bool                           { return true }
func (h *timedHedge) Observe(id placement.DriveID, d time.Duration) {
	h.seen <- observed{id, d}
}

// probeFetch is the fetch a reader that avoids drive 1 (slow) makes when
// the drive is due a probe: fragment 1 last among the sources and among
// the probes.
func (f *fetchFixture) probeFetch(h Hedger) *Fetch {
	sources, _ := Order(f.st, f.drives, func(placement.DriveID) error { return nil },
		func(id placement.DriveID) bool { return id == 1 })
	fe := f.fetch(4, sources)
	fe.Hedge, fe.Probes = h, []Loc{{Index: 1, Drive: 1}}
	return fe
}

// TestFetchProbeNotWaitedFor: a probe of a drive that does not answer is
// sent at once, but the fetch returns the k fragments of the other
// sources without it (nothing hedges it: the bound is an hour).
func TestFetchProbeNotWaitedFor(t *testing.T) {
	f := newFetchFixture(t)
	release := f.ds[1].Hold(drivetest.OpRead)
	defer release()
	got, err := getWithin(t, f.probeFetch(&timedHedge{seen: make(chan observed, 16)}))
	if err != nil || got.OK != 4 || got.Shards[1] != nil {
		t.Fatalf("got %d fragments (shard 1 %v), err %v", got.OK, got.Shards[1] != nil, err)
	}
	f.checkShards(t, got)
	if f.ds[1].Reads() != 1 {
		t.Fatalf("the probed drive was asked %d times, want once", f.ds[1].Reads())
	}
}

// TestFetchProbeRunsToItsEnd: a probe still running when the fetch
// returns is not cancelled with it, nor when the caller then cancels the
// context it passed (a read-ahead does, once its stripe is read): the
// Hedger observes how long the drive really took, not how long the fetch
// lasted.
func TestFetchProbeRunsToItsEnd(t *testing.T) {
	f := newFetchFixture(t)
	const slow = 300 * time.Millisecond
	f.ds[1].SlowDown(slow) // a context-aware delay: a cancelled read ends at once
	h := &timedHedge{seen: make(chan observed, 16)}
	ctx, cancel := context.WithCancel(context.Background())
	got, err := getWithinCtx(t, ctx, f.probeFetch(h))
	cancel()
	if err != nil || got.OK != 4 {
		t.Fatalf("got %d fragments, err %v", got.OK, err)
	}
	f.checkShards(t, got)
	timeout := time.After(20 * time.Second)
	for {
		select {
		case o := <-h.seen:
			if o.id != 1 {
				continue
			}
			if o.d < slow {
				t.Fatalf("the probe was observed after %v, less than the drive's delay %v: it was cancelled", o.d, slow)
			}
			return
		case <-timeout:
			t.Fatal("the probe was never observed")
		}
	}
}

// TestFetchProbeCounts: a probe verified before the fetch is complete is
// one of its k fragments (the drive recovered), so a held data read does
// not hold the fetch.
func TestFetchProbeCounts(t *testing.T) {
	f := newFetchFixture(t)
	release := f.ds[0].Hold(drivetest.OpRead)
	defer release()
	got, err := getWithin(t, f.probeFetch(&timedHedge{seen: make(chan observed, 16)}))
	if err != nil || got.OK != 4 || got.Shards[1] == nil || got.Shards[0] != nil {
		t.Fatalf("got %d fragments (shard 0 %v, shard 1 %v), err %v", got.OK, got.Shards[0] != nil, got.Shards[1] != nil, err)
	}
	f.checkShards(t, got)
	if !slices.Contains(got.Read, Loc{Index: 1, Drive: 1}) {
		t.Fatalf("read %v, want the probe among them", got.Read)
	}
}

// getWithin runs fe.Get and fails the test if it has not returned after
// 20 s: it waits for a read it should not wait for.
func getWithin(t *testing.T, fe *Fetch) (*Fetched, error) {
	t.Helper()
	return getWithinCtx(t, context.Background(), fe)
}

// getWithinCtx is getWithin with the context ctx.
func getWithinCtx(t *testing.T, ctx context.Context, fe *Fetch) (*Fetched, error) {
	t.Helper()
	type result struct {
		got *Fetched
		err error
	}
	done := make(chan result, 1)
	go func() {
		got, err := fe.Get(ctx)
		done <- result{got, err}
	}()
	select {
	case r := <-done:
		return r.got, r.err
	case <-time.After(20 * time.Second):
		t.Fatal("the fetch waits for a read it does not need")
		return nil, nil
	}
}
