package client_test

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"poolfs/internal/chunkstore/drivetest"
	"poolfs/internal/client"
	"poolfs/internal/erasure"
	"poolfs/internal/meta"
	"poolfs/internal/placement"
)

// randomPiece returns n random bytes.
func randomPiece(n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(rand.Uint32())
	}
	return p
}

// TestWriteBackInBackground: a writer of small random writes that passes
// the File's limit of dirty bytes hands them to the background and goes
// on while the log stripes are being written (every drive's writes are
// held here, so a write-back done in the writer's call would never
// return), and reads of the File meanwhile see the newest bytes: those of
// the write-backs in flight and those still dirty. Once the drives answer,
// the file reads as the reference copy through a fresh client.
func TestWriteBackInBackground(t *testing.T) {
	conn := startWith(t, client.Options{StripesInFlight: 2, DeltaBudget: 1 << 40})
	ctx := context.Background()
	const size = 4 << 20
	f, ref := written(t, conn, "f", size)
	ino := f.Attr().Ino

	var releases []func()
	for _, d := range conn.Drives {
		releases = append(releases, d.Hold(drivetest.OpWrite))
	}
	released := false
	release := func() {
		if !released {
			for _, r := range releases {
				r()
			}
			released = true
		}
	}
	defer release()

	// About three write-backs' worth (a write-back every 256 KiB of
	// sparse bytes at this window): fewer than the batches a File runs at
	// once, so none has to wait for the drives.
	done := make(chan error, 1)
	go func() {
		for i := range 96 {
			p := randomPiece(8 << 10)
			off := rand.IntN(size/len(p)) * len(p)
			if _, err := f.WriteAt(ctx, p, int64(off)); err != nil {
				done <- err
				return
			}
			copy(ref[off:], p)
			if i%8 == 7 {
				// Reads while write-backs are in flight.
				ro := rand.IntN(size - 300<<10)
				got := make([]byte, 300<<10)
				if _, err := f.ReadAt(ctx, got, int64(ro)); err != nil {
					done <- err
					return
				}
				if d := firstDiff(got, ref[ro:ro+len(got)]); d >= 0 {
					t.Errorf("write %d: read at %d differs at byte %d while writing back", i, ro, ro+d)
				}
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		release()
		<-done
		t.Fatal("small writes waited for their write-back's log stripes to be written")
	}
	// Nothing could be written: every byte came from the File's buffers.
	got := make([]byte, size)
	if _, err := f.ReadAt(ctx, got, 0); err != nil {
		t.Fatal(err)
	}
	if d := firstDiff(got, ref); d >= 0 {
		t.Fatalf("read of the whole file while writing back differs at byte %d", d)
	}
	release()
	if err := f.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if ext, _ := deltaStats(t, conn, ino); ext == 0 {
		t.Fatal("no delta extents committed by the write-backs")
	}
	checkFile(t, fresh(conn), ino, ref, "after the background write-backs")
}

// TestWriteBackOrder: blocks written over and over, with several
// write-backs in flight whose log stripes land on drives of different
// speeds (a later write-back's log may be written first), end with the
// last bytes written to each block: the commits of one stripe land in the
// order its bytes were written.
func TestWriteBackOrder(t *testing.T) {
	conn := startWith(t, client.Options{StripesInFlight: 2, DeltaBudget: 1 << 40})
	ctx := context.Background()
	const size = 2 << 20
	f, ref := written(t, conn, "f", size)
	ino := f.Attr().Ino
	i := 0
	for _, d := range conn.Drives {
		if i%3 == 0 {
			d.SlowDown(time.Duration(1+i) * time.Millisecond)
		}
		i++
	}
	const blk, blocks = 4 << 10, 64 // a small region: every write-back has them all
	for n := range 600 {
		b := rand.IntN(blocks)
		p := make([]byte, blk)
		for j := 0; j < blk; j += 8 {
			binary.LittleEndian.PutUint64(p[j:], uint64(n)<<16|uint64(j))
		}
		off := b*blk*7 + blk // spread over the first stripes
		if _, err := f.WriteAt(ctx, p, int64(off)); err != nil {
			t.Fatal(err)
		}
		copy(ref[off:], p)
		if n%60 == 59 {
			// A small write elsewhere in a stripe of its own, so that the
			// write-backs have more than one log stripe to race.
			q := randomPiece(32 << 10)
			o := size/2 + rand.IntN(size/2-len(q))
			if _, err := f.WriteAt(ctx, q, int64(o)); err != nil {
				t.Fatal(err)
			}
			copy(ref[o:], q)
		}
	}
	if err := f.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	checkFile(t, fresh(conn), ino, ref, "after overwrites in several write-backs")
}

// TestLogCrashBeforeCommit: write-backs stopped between writing their log
// stripes and the commit (as a crash would stop them) lose nothing that
// was fsynced and expose none of their bytes: the file reads as it was at
// the last Sync, byte for byte; the log stripes' fragments are on the
// drives under generations no record names (the collector's orphans).
// Writing on afterwards works.
func TestLogCrashBeforeCommit(t *testing.T) {
	conn := startWith(t, client.Options{StripesInFlight: 2, DeltaBudget: 1 << 40})
	ctx := context.Background()
	const size = 4 << 20
	f, ref := written(t, conn, "f", size)
	ino := f.Attr().Ino
	randomWrites(t, f, ref, 60, 16<<10)
	if err := f.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	synced := append([]byte(nil), ref...)

	var mu sync.Mutex
	var stopped []meta.LogCommit
	client.SetLogWritten(conn.Client, func(logs []meta.LogCommit) bool {
		mu.Lock()
		defer mu.Unlock()
		stopped = append(stopped, logs...)
		return false
	})
	// Enough for background write-backs and the flush's own.
	var flushErr error
	for range 120 {
		p := randomPiece(4<<10 + rand.IntN(12<<10))
		off := rand.IntN(size - len(p))
		if _, err := f.WriteAt(ctx, p, int64(off)); err != nil {
			flushErr = err // a background write-back's error, reported once
		}
		copy(ref[off:], p)
	}
	if err := f.Flush(ctx); err != nil {
		flushErr = err
	}
	if flushErr == nil || !strings.Contains(flushErr.Error(), "stopped before the commit") {
		t.Fatalf("write-backs stopped before their commit: error %v", flushErr)
	}
	if len(stopped) == 0 {
		t.Fatal("no log stripe was written")
	}
	client.SetLogWritten(conn.Client, nil)
	checkFile(t, fresh(conn), ino, synced, "after write-backs stopped before their commit")
	for _, lc := range stopped {
		if ok, err := conn.Meta.Committed(ctx, ino, lc.Rec.Stripe, lc.Rec.Gen); err != nil || ok {
			t.Fatalf("stopped log stripe %#x committed: %v %v", lc.Rec.Stripe, ok, err)
		}
		for i, id := range lc.Rec.Drives {
			key := erasure.FragmentKey{Ino: uint64(ino), Stripe: lc.Rec.Stripe, Gen: lc.Rec.Gen, Index: uint8(i)}
			if conn.Drives[placement.DriveID(id)].Fragment(key) == nil {
				t.Fatalf("fragment %v of a stopped log stripe not on drive %d", key, id)
			}
		}
	}

	// The handle goes on from the synced state.
	g := reopen(t, conn, f)
	randomWrites(t, g, synced, 60, 16<<10)
	checkFile(t, fresh(conn), ino, synced, "writing on after the stopped write-backs")
}
