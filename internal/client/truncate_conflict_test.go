package client_test

import (
	"context"
	"testing"
	"time"

	"poolfs/internal/chunkstore/drivetest"
	"poolfs/internal/client"
)

// TestTruncateOverConcurrentCommit: a truncation to the middle of a
// stripe reads the stripe and rewrites its first bytes. When another
// writer (or a fold) commits that stripe in between, the truncation reads
// the new version and cuts that. Before, it merged the bytes it had read
// over the new generation, and so wrote back bytes the other writer had
// replaced and flushed (this test: the kept part of stripe 1 was the old
// data); and a commit between its records and its own commit failed
// ftruncate with EAGAIN (`poolfs bench fsx` with a tiny delta budget, folds
// running all the time, found that).
func TestTruncateOverConcurrentCommit(t *testing.T) {
	ctx := context.Background()
	conn := startWith(t, client.Options{})
	w, ref := written(t, conn, "f", 3*256<<10)
	sb := client.StripeBytes(w.Attr().Layout)
	if int64(len(ref)) != 3*sb {
		t.Fatalf("stripes of %d bytes, the test assumes %d", sb, 256<<10)
	}
	ino := w.Attr().Ino
	w.Close()
	cutter, err := fresh(conn).Client.Open(ctx, ino, "f")
	if err != nil {
		t.Fatal(err)
	}
	defer cutter.Close()
	writer, err := fresh(conn).Client.Open(ctx, ino, "f")
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close()

	// The truncation reads stripe 1 and waits there, on held reads.
	var release []func()
	for _, d := range conn.Drives {
		release = append(release, d.Hold(drivetest.OpRead))
	}
	releaseAll := func() {
		for _, r := range release {
			r()
		}
	}
	defer releaseAll()
	reads := conn.Drives.Reads()
	cut := sb + sb/3
	done := make(chan error, 1)
	go func() { done <- cutter.Truncate(ctx, cut) }()
	for deadline := time.Now().Add(10 * time.Second); conn.Drives.Reads() == reads; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the truncation read nothing in 10 s")
		}
	}
	// Meanwhile another client rewrites stripe 1 whole (no reads).
	next := make([]byte, sb)
	fill(next)
	if _, err := writer.WriteAt(ctx, next, sb); err != nil {
		t.Fatal(err)
	}
	if err := writer.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	copy(ref[sb:], next)
	releaseAll()
	if err := <-done; err != nil {
		t.Fatalf("truncate over a stripe committed meanwhile: %v", err)
	}
	checkFile(t, fresh(conn), ino, ref[:cut], "after the truncation")
}
