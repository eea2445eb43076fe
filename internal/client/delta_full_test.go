package client_test

import (
	"context"
	"testing"

	"poolfs/internal/client"
)

// TestFullPoolWritesStripesInstead: a pool with no room for log stripes
// still takes small overwrites of committed data, in the background
// write-backs and in flush's own: they are written as new generations of
// the same length, which need no room, and read back as written. (Before,
// every such write failed with ErrPoolFull at its fsync, though it needed
// no space in the end: a 700 MiB file in a 1 GiB pool took a few thousand
// random 64 KiB writes and then none.)
func TestFullPoolWritesStripesInstead(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		window int // StripesInFlight: small, write-backs in the background
		writes int
	}{
		{"background write-backs", 2, 400},
		{"flush's write-back", 64, 40},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn := startWith(t, client.Options{StripesInFlight: c.window})
			f, ref, used := writtenWithRoom(t, conn, 8<<20, 4096) // room for no log stripe
			ino, pool := f.Attr().Ino, f.Attr().Layout.Pool
			randomWrites(t, f, ref, c.writes, 8<<10)
			if err := f.Flush(ctx); err != nil {
				t.Fatalf("flush with no room for the log: %v", err)
			}
			f.WaitFolds()
			if ext, logs := deltaStats(t, conn, ino); ext != 0 || logs != 0 {
				t.Fatalf("%d extents in %d log stripes in a pool without room for them", ext, logs)
			}
			if now, _, err := conn.Meta.PoolUsage(ctx, pool); err != nil || now > used+4096 {
				t.Fatalf("pool usage %d (%v), limit %d", now, err, used+4096)
			}
			checkFile(t, fresh(conn), ino, ref, "after small writes to a full pool")
		})
	}
}

// TestDeltaLogLeavesRoom: in a pool filling up, a file's delta log takes
// at most about half the room left (its budget shrinks with the pool's
// free space), so random writes to one file leave room for another's.
func TestDeltaLogLeavesRoom(t *testing.T) {
	ctx := context.Background()
	// Two folds at once hold two stripes of the room (budgetLocked).
	conn := startWith(t, client.Options{StripesInFlight: 2, FoldsInFlight: 2})
	const room = 12 << 20 // raw bytes left for the log and the other file
	f, ref, _ := writtenWithRoom(t, conn, 8<<20, room)
	ino := f.Attr().Ino
	most := 0
	for range 40 {
		randomWrites(t, f, ref, 50, 8<<10)
		most = max(most, logBytes(t, conn, ino))
	}
	if err := f.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	f.WaitFolds()
	most = max(most, logBytes(t, conn, ino))
	// 4+2: the room is 8 MiB of user bytes, half of it 4 MiB; the budget
	// may pass by an eighth, and the write-backs in flight (4 of 256 KiB
	// at this window) and the one that crossed it come on top.
	if bound := (room/6*4/2)*9/8 + 5*256<<10; most > bound || most == 0 {
		t.Fatalf("the delta log held at most %d bytes with %d raw bytes of room, want some and at most %d", most, room, bound)
	}
	t.Logf("most log stripe bytes seen: %d with %d raw bytes of room", most, room)
	// What the log left is the other file's.
	g := create(t, conn, "g")
	other := randomPiece(1 << 20) // 1.5 MiB raw
	if _, err := g.WriteAt(ctx, other, 0); err != nil {
		t.Fatalf("a new file in the room the log left: %v", err)
	}
	if err := g.Flush(ctx); err != nil {
		t.Fatalf("a new file in the room the log left: %v", err)
	}
	checkFile(t, fresh(conn), ino, ref, "after random writes to a pool filling up")
}

// TestTightPoolTurnsLogOff: a pool whose room, halved, does not hold the
// stripes left to the folds in flight (foldRoom, 1 MiB here) and a stripe
// of log besides takes small writes as whole-stripe merges, not into the
// delta log, though log stripes would fit: the log and its folds in flight
// filled small drives to their write limits and random overwrites failed
// with ENOSPC. The bytes read back as written.
func TestTightPoolTurnsLogOff(t *testing.T) {
	ctx := context.Background()
	conn := startWith(t, client.Options{StripesInFlight: 2})
	const (
		size = 8 << 20
		room = 3 << 20 // 2 MiB of user bytes: 1 MiB for the log, less 1 MiB of folds
	)
	// The limit is set before the file is written, so that the client
	// learns it with its first write (writtenWithRoom sets it after).
	used0, _, err := conn.Meta.PoolUsage(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	used := used0 + size/4*6
	if err := conn.Meta.SetPoolLimit(ctx, 0, used+room); err != nil {
		t.Fatal(err)
	}
	f, ref := written(t, conn, "f", size)
	ino, pool := f.Attr().Ino, f.Attr().Layout.Pool
	most := 0
	for range 8 {
		randomWrites(t, f, ref, 50, 8<<10)
		most = max(most, logBytes(t, conn, ino))
	}
	if err := f.Flush(ctx); err != nil {
		t.Fatalf("flush in a tight pool: %v", err)
	}
	f.WaitFolds()
	if most = max(most, logBytes(t, conn, ino)); most != 0 {
		t.Fatalf("the delta log held up to %d bytes in a pool too tight for it and its folds", most)
	}
	if now, _, err := conn.Meta.PoolUsage(ctx, pool); err != nil || now != used {
		t.Fatalf("pool usage %d (%v), want %d: merges replace stripes of the same size", now, err, used)
	}
	checkFile(t, fresh(conn), ino, ref, "after small writes to a tight pool")
}

// writtenWithRoom writes file "f" of size bytes and sets the pool's limit
// to its usage then plus room raw bytes; it returns the file, its bytes
// and that usage.
func writtenWithRoom(t *testing.T, conn *conn, size int, room uint64) (*client.File, []byte, uint64) {
	t.Helper()
	ctx := context.Background()
	f, ref := written(t, conn, "f", size)
	pool := f.Attr().Layout.Pool
	used, _, err := conn.Meta.PoolUsage(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.Meta.SetPoolLimit(ctx, pool, used+room); err != nil {
		t.Fatal(err)
	}
	// A client caches the pool's usage and limit for up to a second: a
	// new one (the limit set before it starts, as limits change in a
	// cluster: slowly) sees the room from its first write. (With the
	// old one, a fast test wrote through a limit it did not know yet.)
	ino := f.Attr().Ino
	f.Close()
	conn.restart()
	f, err = conn.Client.Open(ctx, ino, "f")
	if err != nil {
		t.Fatal(err)
	}
	return f, ref, used
}
