package storage

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"

	"poolfs/internal/chunkstore"
	"poolfs/internal/erasure"
	"poolfs/internal/placement"
)

// TestReadRepliesPooled reads fragments of mixed sizes over RPC from many
// goroutines at once, whole and in ranges, in an order that makes a
// fragment follow a smaller one: the server reads them into pooled
// buffers it takes back once a reply is sent (handleRead), and every reply
// must hold its own fragment's bytes, never another's.
func TestReadRepliesPooled(t *testing.T) {
	ctx := context.Background()
	d, err := chunkstore.Open(t.TempDir()+"/d0", chunkstore.Options{Capacity: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	drive := servedDrive(t, NewServer(map[placement.DriveID]chunkstore.Drive{0: d}, nil), "rpc")
	shards := []int{4096, 1 << 20, 8192, 64 << 10, 256 << 10, 4096}
	frags := map[erasure.FragmentKey][]byte{}
	var keys []erasure.FragmentKey
	for i, sh := range shards {
		key := erasure.FragmentKey{Ino: 7, Stripe: uint64(i), Gen: 3, Index: 0}
		b := erasure.AlignedBuffer(erasure.FragmentSize(sh))
		hs := erasure.HeaderSize(sh)
		for j := range b[hs:] {
			b[hs+j] = byte(j*31+i*17) ^ byte(j>>12)
		}
		erasure.SealFragment(b, erasure.Header{Key: key, K: 1, M: 1, StripeLen: uint32(sh), ShardSize: uint32(sh)})
		if err := drive.WriteFragment(ctx, key, b); err != nil {
			t.Fatal(err)
		}
		frags[key] = bytes.Clone(b)
		keys = append(keys, key)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := range 40 {
				key := keys[(g+round)%len(keys)]
				want := frags[key]
				off, n := int64(0), int64(-1)
				if round%3 == 2 && len(want) > 2*chunkstore.Align {
					off, n = chunkstore.Align, int64(len(want)-2*chunkstore.Align)
				}
				got, err := drive.ReadFragment(ctx, key, off, n, nil)
				if err != nil {
					errs <- err
					return
				}
				if n < 0 {
					n = int64(len(want))
				}
				if !bytes.Equal(got, want[off:off+n]) {
					errs <- fmt.Errorf("fragment %v [%d, +%d): %d bytes that differ from what was written", key, off, n, len(got))
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
