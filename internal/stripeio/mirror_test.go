package stripeio

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"testing"

	"poolfs/internal/chunkstore/drivetest"
	"poolfs/internal/erasure"
	"poolfs/internal/placement"
)

// discard is a drive that takes every write and keeps nothing.
type discard struct{}

func (discard) ReadFragment(context.Context, erasure.FragmentKey, int64, int64, []byte) ([]byte, error) {
	return nil, errors.New("discard: nothing kept")
}
func (discard) WriteFragment(context.Context, erasure.FragmentKey, []byte) error { return nil }
func (discard) DeleteFragment(context.Context, erasure.FragmentKey) error        { return nil }

// TestWriteMirrorFragments: the copies of a mirror (1+2) are written
// sealed with the checksums of the first, computed once (fewer
// allocations than the three fragments of a 2+1 stripe of the same shard
// size, which each need their own), and each reads back verified, byte for
// byte.
func TestWriteMirrorFragments(t *testing.T) {
	const n = 64<<10 - 100
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(rand.Uint32())
	}
	mirror := &Stripe{Ino: 9, Stripe: 0, Gen: 2, K: 1, M: 2, Pool: 1, Len: n, ShardSize: erasure.ShardSize(n, 1, 1<<20)}
	shard := make([]byte, mirror.ShardSize) // the data, zero padded
	copy(shard, data)
	shards := [][]byte{shard, shard, shard} // a mirror's parity shards are the data shard
	ds := drivetest.NewDrives(3)
	writeAll(t, ds, mirror, shards)
	for i := range shards {
		id := placement.DriveID(i)
		got, err := ReadFragment(context.Background(), ds[id], id, mirror, i, erasure.AlignedBuffer(mirror.FragmentSize()))
		if err != nil {
			t.Fatalf("copy %d: %v", i, err)
		}
		if !bytes.Equal(got[:n], data) {
			t.Fatalf("copy %d read back other bytes", i)
		}
	}

	// Allocations of writing the three fragments, mirror against 2+1.
	coded := *mirror
	coded.K, coded.M = 2, 1
	allocs := func(st *Stripe) float64 {
		targets := make([]Loc, 3)
		frags := make([][]byte, 3)
		for i := range frags {
			targets[i], frags[i] = Loc{Index: i, Drive: placement.DriveID(i)}, NewFragment(st, shard)
		}
		at := func(placement.DriveID) (Drive, error) { return discard{}, nil }
		return testing.AllocsPerRun(20, func() { WriteFragments(context.Background(), at, st, targets, frags) })
	}
	if m, c := allocs(mirror), allocs(&coded); m > c-2 {
		t.Errorf("writing a mirror's 3 copies allocated %.0f times, 3 fragments of 2+1 %.0f: checksums computed for each copy", m, c)
	}
}
