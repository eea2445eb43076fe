package fusefs

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"poolfs/internal/client"
	"poolfs/internal/cluster"
	"poolfs/internal/rpc"
	"poolfs/internal/storage"
)

// TestMetadataRates measures creates, stats and removes per second through
// a mount whose metadata calls go over RPC (as `poolfs mount` does), through
// one that calls the Store in process (as `poolfs up --mount` does), and,
// as the reference of the same run, in a local directory (the file system
// of the test's temporary directory). It runs only with POOLFS_MDRATE=N
// (files).
func TestMetadataRates(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("POOLFS_MDRATE"))
	if n <= 0 {
		t.Skip("set POOLFS_MDRATE=files to measure")
	}
	c := startCluster(t, cluster.Config{})
	for _, where := range []string{"rpc", "inprocess", "local"} {
		t.Run(where, func(t *testing.T) {
			var dir string
			switch where {
			case "rpc":
				dir = mount(t, c)
			case "inprocess":
				dir = mountInProcess(t, c)
			default:
				dir = t.TempDir()
			}
			d := filepath.Join(dir, "rates-"+where)
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
			phase := func(name string, op func(p string) error) {
				start := time.Now()
				for i := range n {
					if err := op(filepath.Join(d, "f"+strconv.Itoa(i))); err != nil {
						t.Fatalf("%s: %v", name, err)
					}
				}
				t.Logf("%-7s %8.0f/s", name, float64(n)/time.Since(start).Seconds())
			}
			phase("create", func(p string) error {
				f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o644)
				if err != nil {
					return err
				}
				return f.Close()
			})
			phase("stat", func(p string) error { _, err := os.Stat(p); return err })
			phase("remove", os.Remove)
		})
	}
}

// mountInProcess mounts c with a client whose metadata service is c's
// Store itself, not an RPC client.
func mountInProcess(t *testing.T, c *cluster.Cluster) string {
	t.Helper()
	conn, err := cluster.Connect(context.Background(), c.Config.Dir, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_, secret, err := cluster.ReadInfo(c.Config.Dir)
	if err != nil {
		t.Fatal(err)
	}
	dialer := storage.NewDialer(secret, rpc.ClientOptions{})
	t.Cleanup(func() { dialer.Close() })
	cl := client.New(c.Store, conn.Mgmt, dialer, client.Options{})
	dir := filepath.Join(publicTempDir(t), "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	srv, err := Mount(dir, cl, Options{AllowOther: true, URing: testURing()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Unmount() })
	return dir
}
