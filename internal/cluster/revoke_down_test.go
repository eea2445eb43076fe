package cluster

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"poolfs/internal/clustermap"
	"poolfs/internal/mgmt"
)

// TestRevokedServerGoesDown: revoking a storage server of a pool takes
// its drives down, as if it had died (the management service's probes are
// refused, as unavailable, like every client's), while the other servers'
// drives stay up: the pool then runs degraded and, past the grace, is
// rebuilt without it.
func TestRevokedServerGoesDown(t *testing.T) {
	ctx := context.Background()
	first, m, join := identityCluster(t)
	for i := range 3 {
		dir := join(fmt.Sprintf("srv%d", i), classServer)
		s, err := StartStorage(ctx, StorageConfig{Dir: dir, Server: fmt.Sprintf("s%d", i),
			Drives: []string{filepath.Join(dir, "d0"), filepath.Join(dir, "d1")}, DriveSize: 64 << 20, Listen: "127.0.0.1:0"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
	}
	info, secret, err := ReadInfo(first)
	if err != nil {
		t.Fatal(err)
	}
	admin, mclose, err := DialMgmt(info, secret)
	if err != nil {
		t.Fatal(err)
	}
	defer mclose()
	if _, err := admin.CreatePoolOfServers(ctx, mgmt.PoolOfServers{Name: "default", K: 2, M: 1, Unit: 64 << 10, Preservation: -1}); err != nil {
		t.Fatal(err)
	}
	states := func() map[string][]clustermap.DriveState {
		mp, err := m.Mgmt.Map(ctx)
		if err != nil {
			t.Fatal(err)
		}
		by := map[string][]clustermap.DriveState{}
		for _, d := range mp.Drives {
			by[d.Server] = append(by[d.Server], d.State)
		}
		return by
	}
	if by := states(); len(by) != 3 {
		t.Fatalf("pool drives by server: %v", by)
	}
	revoked := time.Now()
	if err := admin.Revoke(ctx, "s0"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		by := states()
		down := func(server string) bool {
			for _, st := range by[server] {
				if st != clustermap.StateDown {
					return false
				}
			}
			return len(by[server]) == 2
		}
		if down("s0") {
			for _, s := range []string{"s1", "s2"} {
				for _, st := range by[s] {
					if st != clustermap.StateUp {
						t.Fatalf("%s, not revoked, has a drive %v: %v", s, st, by)
					}
				}
			}
			t.Logf("s0's drives down %v after its revocation", time.Since(revoked).Round(time.Millisecond))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("s0's drives 30 s after its revocation: %v, want down", by)
		}
	}
}
