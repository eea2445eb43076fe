package fusefs

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"poolfs/internal/client"
	"poolfs/internal/cluster"
)

// A mount opens a client session that counts the files it holds open, and
// a clean unmount closes it. (That a killed mount's session expires and
// its orphans go is cmd/poolfs TestKilledMountLeavesNothingStale.)
func TestSessionClosedAtUnmount(t *testing.T) {
	c := startCluster(t, cluster.Config{})
	conn, err := cluster.Connect(context.Background(), c.Config.Dir, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	dir := filepath.Join(publicTempDir(t), "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	srv, err := Mount(dir, conn.Client, Options{AllowOther: true, URing: testURing()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ss, err := c.Store.Sessions(ctx)
	if err != nil || len(ss) != 1 || ss[0].Mount != dir {
		t.Fatalf("sessions after mount: %+v, %v", ss, err)
	}
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, []byte("held"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	ss, _ = c.Store.Sessions(ctx)
	if len(ss) != 1 || ss[0].Opens != 1 {
		t.Fatalf("sessions with one open file: %+v", ss)
	}
	if orph, _ := c.Store.Orphans(ctx, 0, 0); len(orph) != 1 {
		t.Fatalf("orphans: %v", orph)
	}
	f.Close()
	if err := srv.Unmount(); err != nil {
		t.Fatal(err)
	}
	if ss, _ = c.Store.Sessions(ctx); len(ss) != 0 {
		t.Fatalf("sessions after unmount: %+v", ss)
	}
	if orph, _ := c.Store.Orphans(ctx, 0, 0); len(orph) != 0 {
		t.Fatalf("orphans after unmount: %v", orph)
	}
}
