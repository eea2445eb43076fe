package client

import (
	"testing"
	"time"

	"poolfs/internal/chunkstore/drivetest"
	"poolfs/internal/placement"
)

// TestUnreachableIsPerServer: a server is stuck only when none of its
// drives made progress for the bound. Over a busy link the writes to one
// drive can all wait behind the others while its server takes bytes at
// its link's rate (bench/scaling.sh: four clients found one drive without
// progress for 10 s while its server received 3.75 MiB/s, and avoided a
// healthy server for 30 s). Before, progress was counted per drive.
func TestUnreachableIsPerServer(t *testing.T) {
	m := drivetest.Map(8, 4, 2, 64<<10, 1<<30)
	for i := range m.Drives {
		m.Drives[i].Server = []string{"a", "b"}[i/4] // drives 0-3 on a, 4-7 on b
	}
	const after = 10 * time.Second
	t0 := time.Now()
	u := newUnreachables()
	key := func(id int) string { return progressKey(m, placement.DriveID(id)) }
	u.started(key(0), t0) // waits behind the others
	u.started(key(1), t0)
	u.started(key(1), t0)
	u.done(key(1), true, t0.Add(8*time.Second)) // server a makes progress
	u.started(key(4), t0)                       // server b: none
	if id, stuck := u.stuck(m, []uint32{0, 2}, after, t0.Add(11*time.Second)); stuck {
		t.Fatalf("drive %v stuck while another drive of its server made progress 3 s ago", id)
	}
	if id, stuck := u.stuck(m, []uint32{0, 5}, after, t0.Add(11*time.Second)); !stuck || id != 5 {
		t.Fatalf("stuck %v, %v; want drive 5: its server made no progress for 11 s", id, stuck)
	}
	if id, stuck := u.stuck(m, []uint32{0}, after, t0.Add(19*time.Second)); !stuck || id != 0 {
		t.Fatalf("stuck %v, %v; want drive 0: its server made no progress for 11 s", id, stuck)
	}
	// Without servers in the map, each drive stands alone.
	bare := drivetest.Map(8, 4, 2, 64<<10, 1<<30)
	u = newUnreachables()
	u.started(progressKey(bare, 0), t0)
	u.started(progressKey(bare, 1), t0)
	u.done(progressKey(bare, 1), true, t0.Add(8*time.Second))
	if _, stuck := u.stuck(bare, []uint32{0}, after, t0.Add(11*time.Second)); !stuck {
		t.Fatal("a drive without a server is not stuck after 11 s without progress")
	}
}
