package fusefs

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"poolfs/internal/client"
	"poolfs/internal/cluster"
)

func TestMain(m *testing.M) {
	if os.Getenv(writerEnv) != "" {
		os.Exit(writerMain())
	}
	if os.Getenv(mmapCmpEnv) != "" {
		os.Exit(mmapCmpMain())
	}
	if os.Getenv(fsxEnv) != "" {
		os.Exit(fsxMain())
	}
	os.Exit(m.Run())
}

// requireFUSE skips (fails under CI) when this machine cannot mount.
func requireFUSE(t *testing.T) {
	t.Helper()
	why := ""
	if _, err := os.Stat("/dev/fuse"); err != nil {
		why = "no /dev/fuse"
	} else if os.Geteuid() != 0 {
		why = "not root (the tests mount with allow_other and switch users)"
	}
	if why == "" {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("cannot run FUSE tests: %s", why)
	}
	t.Skipf("cannot run FUSE tests: %s", why)
}

// publicTempDir is a t.TempDir that other users can search, as the
// permission checks and allow_other need.
func publicTempDir(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	for _, p := range []string{filepath.Dir(d), d} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// startCluster starts a small embedded cluster for one test.
func startCluster(t *testing.T, cfg cluster.Config) *cluster.Cluster {
	t.Helper()
	requireFUSE(t)
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	cfg.Listen = "127.0.0.1:0"
	if cfg.Drives == 0 {
		cfg.Drives, cfg.Scheme, cfg.Unit = 8, "4+2", 64<<10
	}
	if cfg.DriveSize == 0 {
		cfg.DriveSize = 2 << 30
	}
	cfg.GCInterval = time.Hour
	direct := false
	cfg.DirectIO = &direct
	c, err := cluster.Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("start cluster: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// testURing is whether the tests' mounts serve FUSE over io_uring, as
// `poolfs up --mount` does by default: yes, unless POOLFS_TEST_URING=0
// (the Makefile runs this package both ways).
func testURing() bool { return os.Getenv("POOLFS_TEST_URING") != "0" }

// mount mounts c (through its own client connection, as a separate
// machine would) on a new directory and unmounts it at cleanup, even when
// the test failed.
func mount(t *testing.T, c *cluster.Cluster) string {
	t.Helper()
	dir, _ := mountSrv(t, c)
	return dir
}

// mountSrv mounts as mount does and also returns the Server.
func mountSrv(t *testing.T, c *cluster.Cluster) (string, *Server) {
	t.Helper()
	return mountWith(t, c, Options{AllowOther: true, URing: testURing()})
}

// mountWith is mountSrv with the mount options o.
func mountWith(t *testing.T, c *cluster.Cluster, o Options) (string, *Server) {
	t.Helper()
	conn, err := cluster.Connect(context.Background(), c.Config.Dir, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(publicTempDir(t), "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	srv, err := Mount(dir, conn.Client, o)
	if err != nil {
		conn.Close()
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		done := make(chan error, 1)
		go func() { done <- srv.Unmount() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("unmount: %v", err)
			}
		case <-time.After(30 * time.Second):
			// A failed test left a descriptor open: abort the connection,
			// or the test binary would hang for ever at exit, closing
			// that descriptor on a mount nobody serves any more.
			aerr := abortConn(st.Dev)
			exec.Command("fusermount3", "-u", "-z", dir).Run()
			t.Errorf("unmount %s hung; aborted (%v) and detached it", dir, aerr)
		}
		conn.Close()
	})
	return dir, srv
}

// abortConn aborts the FUSE connection of the mount whose st_dev is dev,
// through the fusectl file system (mounted if it is not): every request
// pending or to come then fails with ENOTCONN.
func abortConn(dev uint64) error {
	const ctl = "/sys/fs/fuse/connections"
	if ents, err := os.ReadDir(ctl); err == nil && len(ents) == 0 {
		_ = syscall.Mount("fusectl", ctl, "fusectl", 0, "")
	}
	// The directory is named for the kernel's dev_t: major<<20 | minor.
	name := strconv.FormatUint(uint64(unix.Major(dev))<<20|uint64(unix.Minor(dev)), 10)
	return os.WriteFile(filepath.Join(ctl, name, "abort"), []byte("1"), 0)
}

// TestMountPointErrors: a mount point that is missing or not a directory
// is refused with a message that names it.
func TestMountPointErrors(t *testing.T) {
	c := startCluster(t, cluster0())
	conn, err := cluster.Connect(context.Background(), c.Config.Dir, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ dir, want string }{
		{filepath.Join(dir, "missing"), "no such file or directory"},
		{file, "is not a directory"},
	} {
		srv, err := Mount(tc.dir, conn.Client, Options{})
		if err == nil {
			srv.Unmount()
			t.Fatalf("mount on %s succeeded", tc.dir)
		}
		if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.dir) {
			t.Errorf("mount on %s: %v, want %q and the path", tc.dir, err, tc.want)
		}
	}
}
