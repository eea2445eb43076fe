package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"poolfs/internal/meta"
)

// TestFailedGroupRunsCallsInTurn: the calls of a group that cannot commit
// as a whole run again on their own one after another, never side by
// side: calls that each add one to the same counter key (as an engine's
// creates do to its inode-count shard) then need no retry, and none is
// lost. Run side by side they aborted each other ("could not serialize
// access due to concurrent update").
func TestFailedGroupRunsCallsInTurn(t *testing.T) {
	e := openPG(t)
	ctx := context.Background()
	release, first := holdUpdate(e, "ctr", "0")
	// The first queued call fails after a Scan sent its writes to the
	// server: its group cannot drop them, so the group commits nothing.
	errBoom := errors.New("boom")
	const n = 8
	var inside, most atomic.Int64
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			errs[i] = e.Update(ctx, func(tx meta.Tx) error {
				if i == 0 {
					if err := tx.Put([]byte("scanned"), []byte("1")); err != nil {
						return err
					}
					if err := tx.Scan([]byte("scanned"), nil, 1, func(_, _ []byte) bool { return true }); err != nil {
						return err
					}
					return errBoom
				}
				in := inside.Add(1)
				defer inside.Add(-1)
				for m := most.Load(); in > m && !most.CompareAndSwap(m, in); m = most.Load() {
				}
				v, err := tx.Get([]byte("ctr"))
				if err != nil {
					return err
				}
				c, err := strconv.Atoi(string(v))
				if err != nil {
					return err
				}
				return tx.Put([]byte("ctr"), []byte(strconv.Itoa(c+1)))
			})
		})
	}
	for deadline := time.Now().Add(10 * time.Second); e.Queued() < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d updates queued behind a running one", e.Queued(), n)
		}
	}
	before := e.Stats()
	release()
	wg.Wait()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for i, err := range errs {
		if i == 0 && !errors.Is(err, errBoom) || i > 0 && err != nil {
			t.Errorf("update %d: %v", i, err)
		}
	}
	if m := most.Load(); m != 1 {
		t.Errorf("%d calls ran at once, want 1", m)
	}
	if st := e.Stats(); st.Retries != before.Retries {
		t.Errorf("%d retries, want none", st.Retries-before.Retries)
	}
	err := e.View(ctx, func(tx meta.Tx) error {
		v, err := tx.Get([]byte("ctr"))
		if err == nil && string(v) != fmt.Sprint(n-1) {
			err = fmt.Errorf("counter %s, want %d", v, n-1)
		}
		if _, gerr := tx.Get([]byte("scanned")); !errors.Is(gerr, meta.ErrNoKey) {
			err = errors.Join(err, fmt.Errorf("the failed call's write: %v, want ErrNoKey", gerr))
		}
		return err
	})
	if err != nil {
		t.Error(err)
	}
}
