package client_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"

	"poolfs/internal/client"
)

// TestConcurrentSmallWritesWithFolds: several writers of one File (as the
// mount's queue of O_DIRECT writes is) write 4 KiB blocks at random, each
// writer its own blocks, while the budget makes folds run beside them.
// Every extent must keep its log stripe, and the file must read back byte
// for byte.
func TestConcurrentSmallWritesWithFolds(t *testing.T) {
	conn := startWith(t, client.Options{StripesInFlight: 2, DeltaBudget: 256 << 10})
	ctx := context.Background()
	const size = 4 << 20
	f, ref := written(t, conn, "f", size)
	ino := f.Attr().Ino
	const writers, blk = 8, 4 << 10
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1500 {
				b := rand.IntN(size/blk/writers)*writers + w
				p := make([]byte, blk)
				for j := range p {
					p[j] = byte(rand.Uint32())
				}
				if _, err := f.WriteAt(ctx, p, int64(b*blk)); err != nil {
					t.Error(err)
					return
				}
				copy(ref[b*blk:], p) // each writer its own blocks
			}
		}()
	}
	wg.Add(1)
	go func() { // fsyncs and closes of other descriptors flush the File
		defer wg.Done()
		for range 50 {
			if err := f.Flush(ctx); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	wg.Wait()
	if err := f.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	f.WaitFolds()
	deltaStats(t, conn, ino) // fails on an extent without its log stripe
	checkFile(t, fresh(conn), ino, ref, "after concurrent writes and folds")
}
