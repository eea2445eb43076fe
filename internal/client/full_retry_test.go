package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"poolfs/internal/chunkstore"
	"poolfs/internal/meta"
)

func TestFullRetry(t *testing.T) {
	full := fmt.Errorf("%w: %w", ErrPoolFull, chunkstore.ErrFull)
	other := errors.New("disk on fire")
	for _, tc := range []struct {
		name      string
		replacing bool
		stuck     bool
		drains    []bool  // what each drain reports (then false)
		fails     []error // what each write returns (then nil)
		want      error
		writes    int
		stuckLast bool
		atMost    time.Duration
	}{
		{name: "written at once", replacing: true, writes: 1},
		{name: "other error", replacing: true, fails: []error{other}, want: other, writes: 1},
		{name: "replacement waits for the writes in flight", replacing: true,
			fails: []error{full, full, full}, writes: 4},
		{name: "replacement after the collector", replacing: true, drains: []bool{true},
			fails: []error{full}, writes: 2},
		{name: "replacement gives up", replacing: true, fails: slices.Repeat([]error{full}, 1000),
			want: chunkstore.ErrFull, stuckLast: true, atMost: 2 * time.Second},
		{name: "stuck: once more after the collector", replacing: true, stuck: true, drains: []bool{true},
			fails: []error{full}, writes: 2},
		{name: "stuck: no wait without a collector", replacing: true, stuck: true,
			fails: []error{full, full}, want: chunkstore.ErrFull, writes: 1, stuckLast: true},
		{name: "a success unsticks", replacing: true, stuck: true, writes: 1},
		{name: "new stripe: no wait", fails: []error{full, full}, want: chunkstore.ErrFull, writes: 1},
		{name: "new stripe: once more after the collector", drains: []bool{true}, fails: []error{full}, writes: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stuck atomic.Bool
			stuck.Store(tc.stuck)
			drains, writes := 0, 0
			drain := func(context.Context) bool {
				drains++
				return drains <= len(tc.drains) && tc.drains[drains-1]
			}
			write := func() (meta.StripeRec, error) {
				writes++
				if writes <= len(tc.fails) {
					return meta.StripeRec{}, tc.fails[writes-1]
				}
				return meta.StripeRec{Gen: 9}, nil
			}
			start := time.Now()
			rec, err := fullRetry(context.Background(), tc.replacing, &stuck, time.Second, drain, write)
			if tc.want == nil && (err != nil || rec.Gen != 9) {
				t.Fatalf("got %v, %v; want the record written", rec, err)
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("got %v; want %v", err, tc.want)
			}
			if tc.writes > 0 && writes != tc.writes {
				t.Errorf("%d writes, want %d", writes, tc.writes)
			}
			if stuck.Load() != tc.stuckLast {
				t.Errorf("stuck %v, want %v", stuck.Load(), tc.stuckLast)
			}
			if tc.atMost > 0 && time.Since(start) > tc.atMost {
				t.Errorf("gave up after %v, want at most %v", time.Since(start), tc.atMost)
			}
		})
	}
}

func TestFullRetryStopsWithContext(t *testing.T) {
	var stuck atomic.Bool
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := fullRetry(ctx, true, &stuck, fullWait, func(context.Context) bool { return false },
		func() (meta.StripeRec, error) { return meta.StripeRec{}, chunkstore.ErrFull })
	if !errors.Is(err, chunkstore.ErrFull) || time.Since(start) > 2*time.Second {
		t.Fatalf("got %v after %v; want the drive's error once the context ends", err, time.Since(start))
	}
}

func TestMergeGroups(t *testing.T) {
	for _, tc := range []struct {
		todo []uint64
		n    int
		want [][]uint64
	}{
		{nil, 8, nil},
		{[]uint64{1, 2, 3}, 8, [][]uint64{{1, 2, 3}}},
		{[]uint64{1, 2, 3, 4, 5}, 2, [][]uint64{{1, 2}, {3, 4}, {5}}},
		{[]uint64{4, 9}, 0, [][]uint64{{4}, {9}}},
	} {
		var got [][]uint64
		for g := range mergeGroups(tc.todo, tc.n) {
			got = append(got, g)
		}
		if !slices.EqualFunc(got, tc.want, slices.Equal) {
			t.Errorf("mergeGroups(%v, %d) = %v, want %v", tc.todo, tc.n, got, tc.want)
		}
	}
	todo := []uint64{0, 1, 8, 9}
	for _, tc := range []struct {
		group          []uint64
		sb, size, want int64
	}{
		{[]uint64{0, 1}, 10, 100, 20},  // ends where its last stripe does
		{[]uint64{0, 1}, 10, 15, 15},   // never beyond the size
		{[]uint64{8, 9}, 10, 200, 200}, // the last group sets the size
		{nil, 10, 95, 95},
	} {
		if got := groupSize(todo, tc.group, tc.sb, tc.size); got != tc.want {
			t.Errorf("groupSize(%v, %v, %d, %d) = %d, want %d", todo, tc.group, tc.sb, tc.size, got, tc.want)
		}
	}
}
