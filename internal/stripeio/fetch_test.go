package stripeio

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"poolfs/internal/chunkstore"
	"poolfs/internal/chunkstore/drivetest"
	"poolfs/internal/erasure"
	"poolfs/internal/placement"
)

// fixedHedge is a Hedger with a fixed bound that records what it observes.
type fixedHedge struct {
	bound time.Duration
	seen  chan placement.DriveID
}

func (h *fixedHedge) Bound(placement.DriveID) time.Duration { return h.bound }
func (h *fixedHedge) Hedge() bool                           { return true }
func (h *fixedHedge) Observe(id placement.DriveID, _ time.Duration) {
	select {
	case h.seen <- id:
	default:
	}
}

// fetchFixture is a 4+2 stripe written to six drivetest drives, fragment
// i on drive i.
type fetchFixture struct {
	ds     drivetest.Drives
	st     *Stripe
	shards [][]byte
	data   []byte
	drives []placement.DriveID
}

func newFetchFixture(t *testing.T) *fetchFixture {
	t.Helper()
	f := &fetchFixture{ds: drivetest.NewDrives(6)}
	f.st, f.shards, f.data = testStripe(t, 4*64<<10-1000)
	writeAll(t, f.ds, f.st, f.shards)
	for i := range 6 {
		f.drives = append(f.drives, placement.DriveID(i))
	}
	return f
}

func (f *fetchFixture) fetch(need int, sources []Loc) *Fetch {
	if sources == nil {
		sources, _ = Order(f.st, f.drives, func(placement.DriveID) error { return nil }, func(placement.DriveID) bool { return false })
	}
	return &Fetch{Stripe: f.st, Sources: sources, Need: need, At: OnMap(f.ds, nil)}
}

// checkShards fails the test unless every shard got holds is the one
// written.
func (f *fetchFixture) checkShards(t *testing.T, got *Fetched) {
	t.Helper()
	for i, sh := range got.Shards {
		if sh != nil && !bytes.Equal(sh, f.shards[i]) {
			t.Fatalf("shard %d read back other bytes", i)
		}
	}
}

// TestFetchReadsDataFirst: a healthy stripe is read from its k data
// fragments alone, verified, and no parity drive is asked.
func TestFetchReadsDataFirst(t *testing.T) {
	f := newFetchFixture(t)
	got, err := f.fetch(4, nil).Get(context.Background())
	if err != nil || got.OK != 4 || len(got.Failed) != 0 {
		t.Fatalf("got %d fragments, failed %v, err %v", got.OK, got.Failed, err)
	}
	f.checkShards(t, got)
	for i := range 4 {
		if got.Shards[i] == nil {
			t.Fatalf("data shard %d not read", i)
		}
	}
	if r := f.ds[4].Reads() + f.ds[5].Reads(); r != 0 {
		t.Fatalf("%d parity reads for a healthy stripe", r)
	}
}

// TestFetchReplacesFailed: a missing and a corrupt data fragment are
// replaced by parity, reported in Failed with their causes, and the
// stripe decodes byte for byte from what was fetched.
func TestFetchReplacesFailed(t *testing.T) {
	f := newFetchFixture(t)
	f.ds[1].Remove(f.st.Key(1))
	if err := f.ds[2].Corrupt(f.st.Key(2), erasure.HeaderSize(f.st.ShardSize)+7, 3); err != nil {
		t.Fatal(err)
	}
	got, err := f.fetch(4, nil).Get(context.Background())
	if err != nil || got.OK != 4 {
		t.Fatalf("got %d fragments, err %v", got.OK, err)
	}
	if !slices.Equal(got.Failed, []int{1, 2}) {
		t.Fatalf("failed %v, want [1 2]", got.Failed)
	}
	if !errors.Is(got.Errs[1], chunkstore.ErrNotFound) || !errors.Is(got.Errs[2], erasure.ErrChecksum) {
		t.Fatalf("errors %v", got.Errs)
	}
	f.checkShards(t, got)
	var cds Codecs
	if err := Reconstruct(&cds, f.st, got.Shards, got.Failed); err != nil {
		t.Fatal(err)
	}
	if d := erasure.Join(nil, got.Shards[:4], 4, len(f.data)); !bytes.Equal(d, f.data) {
		t.Fatal("the stripe decoded from data and parity differs from what was written")
	}
	if !bytes.Equal(got.Shards[1], f.shards[1]) || !bytes.Equal(got.Shards[2], f.shards[2]) {
		t.Fatal("the lost shards were not reconstructed as written")
	}
}

// TestFetchHedgesAroundHeldDrive: a data fragment whose drive does not
// answer at all (and ignores cancellation) does not hold the fetch: after
// the hedging bound parity is read beside it, Get returns k verified
// shards while the drive is still held, and the held read's buffer is no
// longer the caller's.
func TestFetchHedgesAroundHeldDrive(t *testing.T) {
	f := newFetchFixture(t)
	release := f.ds[1].Hold(drivetest.OpRead)
	defer release()
	fe := f.fetch(4, nil)
	fe.Hedge = &fixedHedge{bound: time.Millisecond, seen: make(chan placement.DriveID, 16)}
	fe.Bufs = make([][]byte, 6)
	for i := range fe.Bufs {
		fe.Bufs[i] = erasure.AlignedBuffer(f.st.FragmentSize())
	}
	held := fe.Bufs[1]
	done := make(chan struct{})
	var got *Fetched
	var err error
	go func() { got, err = fe.Get(context.Background()); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the fetch waits for the held drive")
	}
	if err != nil || got.OK != 4 || got.Shards[1] != nil {
		t.Fatalf("got %d fragments (shard 1 %v), err %v", got.OK, got.Shards[1] != nil, err)
	}
	f.checkShards(t, got)
	if &fe.Bufs[1][:1][0] == &held[:1][0] {
		t.Fatal("the buffer of the read still running was left in Bufs")
	}
	if f.ds[1].Reads() != 1 {
		t.Fatal("the held drive was never asked: the test proves nothing")
	}
}

// TestFetchWithoutHedgeWaits: with no Hedger a fetch waits for a slow
// read rather than read parity beside it (rebuild and scrub read exactly
// what they name).
func TestFetchWithoutHedgeWaits(t *testing.T) {
	f := newFetchFixture(t)
	release := f.ds[0].Hold(drivetest.OpRead)
	done := make(chan struct{})
	go func() {
		defer close(done)
		got, err := f.fetch(4, nil).Get(context.Background())
		if err != nil || got.OK != 4 {
			t.Errorf("got %v, %v", got, err)
		}
	}()
	select {
	case <-done:
		t.Fatal("the fetch returned while a read it needs was held")
	case <-time.After(50 * time.Millisecond):
	}
	release()
	<-done
	if r := f.ds[4].Reads() + f.ds[5].Reads(); r != 0 {
		t.Fatalf("%d parity reads without hedging", r)
	}
}

// TestFetchTooFewAndCanceled: with more than m fragments gone a fetch
// reports what it got and why the rest failed; a canceled context ends it
// with the context's error.
func TestFetchTooFewAndCanceled(t *testing.T) {
	f := newFetchFixture(t)
	for i := range 3 {
		f.ds[placement.DriveID(i)].Remove(f.st.Key(i))
	}
	got, err := f.fetch(4, nil).Get(context.Background())
	if err != nil || got.OK != 3 || len(got.Failed) != 3 {
		t.Fatalf("got %d fragments, failed %v, err %v", got.OK, got.Failed, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	release := f.ds[3].Hold(drivetest.OpRead)
	defer release()
	go func() { time.Sleep(10 * time.Millisecond); cancel() }()
	if _, err := f.fetch(4, nil).Get(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled fetch: %v", err)
	}
}

// TestFetchSourcesOnce: a source whose fragment was already read is
// passed over; Read lists each fragment once, with the drive it came from.
func TestFetchSourcesOnce(t *testing.T) {
	f := newFetchFixture(t)
	src := []Loc{{0, 0}, {0, 0}, {1, 1}, {1, 1}, {2, 2}, {3, 3}}
	got, err := f.fetch(4, src).Get(context.Background())
	if err != nil || got.OK != 4 {
		t.Fatal(got, err)
	}
	slices.SortFunc(got.Read, func(a, b Loc) int { return a.Index - b.Index })
	if !slices.Equal(got.Read, []Loc{{0, 0}, {1, 1}, {2, 2}, {3, 3}}) {
		t.Fatalf("read %v", got.Read)
	}
	if f.ds[0].Reads() != 1 || f.ds[1].Reads() != 1 {
		t.Fatal("a fragment was read twice")
	}
}

// TestOrder: data fragments first, parity from a fragment that rotates
// with the stripe number, drives to avoid last, and drives known down
// left out with their reason.
func TestOrder(t *testing.T) {
	drives := []placement.DriveID{10, 11, 12, 13, 14, 15, 16}
	none := func(placement.DriveID) error { return nil }
	never := func(placement.DriveID) bool { return false }
	for _, tc := range []struct {
		name   string
		stripe uint64
		down   func(placement.DriveID) error
		slow   func(placement.DriveID) bool
		want   []int
	}{
		{"healthy", 0, none, never, []int{0, 1, 2, 3, 4, 5, 6}},
		{"parity rotates", 1, none, never, []int{0, 1, 2, 3, 5, 6, 4}},
		{"parity rotates again", 5, none, never, []int{0, 1, 2, 3, 6, 4, 5}},
		{"down left out", 0, func(id placement.DriveID) error {
			if id == 11 {
				return fmt.Errorf("drive %v is down", id)
			}
			return nil
		}, never, []int{0, 2, 3, 4, 5, 6}},
		{"slow last", 0, none, func(id placement.DriveID) bool { return id == 12 || id == 15 }, []int{0, 1, 3, 4, 6, 2, 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &Stripe{Stripe: tc.stripe, K: 4, M: 3}
			src, errs := Order(st, drives, tc.down, tc.slow)
			var got []int
			for _, s := range src {
				if s.Drive != drives[s.Index] {
					t.Fatalf("fragment %d on %v, want %v", s.Index, s.Drive, drives[s.Index])
				}
				got = append(got, s.Index)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("order %v, want %v", got, tc.want)
			}
			for i, err := range errs {
				if (err != nil) != !slices.Contains(tc.want, i) {
					t.Fatalf("fragment %d: error %v", i, err)
				}
			}
		})
	}
}
