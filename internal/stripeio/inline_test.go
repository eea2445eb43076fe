package stripeio

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"poolfs/internal/chunkstore"
	"poolfs/internal/chunkstore/drivetest"
	"poolfs/internal/erasure"
	"poolfs/internal/placement"
)

// goid returns the calling goroutine's number ("goroutine N [...").
func goid() string {
	b := make([]byte, 64)
	b = b[:runtime.Stack(b, false)]
	return string(bytes.Fields(b)[1])
}

// inProc is a drive served in process that records the goroutine of
// every write.
type inProc struct {
	*drivetest.Drive
	inProcess bool
	mu        *sync.Mutex
	writers   map[string]int
}

func (d inProc) InProcess() bool { return d.inProcess }

var _ chunkstore.InProcess = inProc{}

func (d inProc) WriteFragment(ctx context.Context, key erasure.FragmentKey, frag []byte) error {
	d.mu.Lock()
	d.writers[goid()]++
	d.mu.Unlock()
	return d.Drive.WriteFragment(ctx, key, frag)
}

// TestWriteFragmentsInline: small fragments bound for drives served in
// process are written by the caller's goroutine (a small file's close
// waits for no goroutine); large ones, and those for drives behind a
// network, go out in parallel. Every fragment reads back byte for byte.
func TestWriteFragmentsInline(t *testing.T) {
	for _, tc := range []struct {
		name       string
		n, unit    int
		inProcess  bool
		wantInline bool
	}{
		{"small fragments, in process", 4 << 10, 64 << 10, true, true},
		{"small fragments, remote", 4 << 10, 64 << 10, false, false},
		{"large fragments, in process", 4 * 256 << 10, 256 << 10, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ds := drivetest.NewDrives(6)
			var mu sync.Mutex
			writers := map[string]int{}
			// A remote drive's resolution may dial or report: after the
			// first, the others resolve at once (drives 1.. wait, up to a
			// second, until all of them are being resolved).
			resolving, together := 0, false
			at := func(id placement.DriveID) (Drive, error) {
				mu.Lock()
				resolving++
				together = together || resolving == len(ds)-1
				for deadline := time.Now().Add(time.Second); !tc.inProcess && id > 0 && !together && time.Now().Before(deadline); {
					mu.Unlock()
					time.Sleep(time.Millisecond)
					mu.Lock()
				}
				resolving--
				mu.Unlock()
				return inProc{Drive: ds[id], inProcess: tc.inProcess, mu: &mu, writers: writers}, nil
			}
			st, shards, _ := testStripeUnit(t, tc.n, tc.unit)
			targets := make([]Loc, len(shards))
			frags := make([][]byte, len(shards))
			for i := range shards {
				targets[i], frags[i] = Loc{Index: i, Drive: placement.DriveID(i)}, NewFragment(st, shards[i])
			}
			if err := errors.Join(WriteFragments(context.Background(), at, st, targets, frags)...); err != nil {
				t.Fatal(err)
			}
			if !tc.inProcess && !together {
				t.Fatal("remote drives were resolved one after another")
			}
			me := goid()
			if inline := writers[me] == len(shards) && len(writers) == 1; inline != tc.wantInline {
				t.Fatalf("writes by goroutines %v (caller %s); want all inline: %v", writers, me, tc.wantInline)
			}
			for i := range shards {
				id := placement.DriveID(i)
				got, err := ReadFragment(context.Background(), ds[id], id, st, i, nil)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, shards[i]) {
					t.Fatalf("fragment %d read back other bytes", i)
				}
			}
		})
	}
}
