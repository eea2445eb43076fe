package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"poolfs/internal/client"
	"poolfs/internal/clustermap"
	"poolfs/internal/mgmt"
	"poolfs/internal/placement"
)

// fillPool writes files of up to maxSize bytes until the pool refuses them
// (client.ErrPoolFull), then smaller ones until those are refused too, and
// returns what was stored. Any other error fails the test.
func fillPool(t *testing.T, conn *Conn, maxSize int) map[string][]byte {
	t.Helper()
	ctx := context.Background()
	files := map[string][]byte{}
	for i, refused := 0, 0; maxSize > 0; i++ {
		data := randBytes(t, 1+(i*7919)%maxSize)
		p := fmt.Sprintf("/fill%05d", i)
		_, err := conn.Client.Put(ctx, p, bytes.NewReader(data), client.PutOptions{Size: int64(len(data))})
		switch {
		case err == nil:
			files[p] = data
			refused = 0
		case errors.Is(err, client.ErrPoolFull):
			if refused++; refused == 8 {
				maxSize, refused = maxSize/4, 0
			}
		default:
			t.Fatalf("put %s (%d bytes): %v", p, len(data), err)
		}
	}
	return files
}

// TestFullPoolRebuildsPreservationFailures is the preservation promise: a
// pool written until it reports "pool full" can still rebuild its
// preservation count of drive failures, one after another. Every rebuild
// completes, nothing is lost, every file reads back byte for byte.
func TestFullPoolRebuildsPreservationFailures(t *testing.T) {
	for _, tc := range []struct {
		name   string
		drives int
		scheme string
	}{
		{"12x8+2", 12, "8+2"},
		{"16x4+2", 16, "4+2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, conn := startTest(t, Config{Drives: tc.drives, Scheme: tc.scheme, Unit: 16 << 10, DriveSize: 4 << 20,
				HealthInterval: 50 * time.Millisecond, RebuildInterval: time.Second})
			ctx := context.Background()
			files := fillPool(t, conn, 6*64<<10)
			m, err := c.Mgmt.Map(ctx)
			if err != nil {
				t.Fatal(err)
			}
			pool := m.Pools[0]
			capa, _ := m.PoolCapacity(pool.ID)
			used, _, _ := c.Store.PoolUsage(ctx, pool.ID)
			t.Logf("pool full at %d files, %d of %d usable raw bytes (%.1f%%), preservation %d",
				len(files), used, capa.UsableRaw, 100*float64(used)/float64(capa.UsableRaw), pool.Preservation)
			if pool.Preservation < 1 {
				t.Fatal("no preservation to test")
			}
			for i := 0; i < pool.Preservation; i++ {
				victim := placement.DriveID(3 + 4*i)
				if err := conn.Mgmt.FailDrive(ctx, victim); err != nil {
					t.Fatal(err)
				}
				waitRecovered(t, c)
				if s := driveState(t, c, victim); s != clustermap.StateFailed {
					t.Fatalf("drive %v is %s", victim, s)
				}
			}
			if kinds := eventKinds(t, conn); strings.Contains(kinds, mgmt.EventDataLost) {
				t.Fatalf("events after %d failures: %s", pool.Preservation, kinds)
			}
			verifyFiles(t, conn, files)
		})
	}
}
