package fusefs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"poolfs/internal/client"
	"poolfs/internal/cluster"
	"poolfs/internal/fusefs/posixtest"
	"poolfs/internal/meta"
)

// TestPOSIX runs the conformance table against a poolfs mount.
func TestPOSIX(t *testing.T) {
	c := startCluster(t, cluster0())
	mnt := mount(t, c)
	posixtest.Run(t, mnt, posixtest.Options{BigDir: 100000, Populate: func(dir string, n int) error {
		return populate(c, mnt, dir, n)
	}})
}

// TestPOSIXControl runs the same table against a local directory: a
// check that fails here is wrong, not poolfs.
func TestPOSIXControl(t *testing.T) {
	requireFUSE(t) // root, for chown and the user switch
	posixtest.Run(t, publicTempDir(t), posixtest.Options{BigDir: 100000})
}

// TestEXDEV: rename and link between two mounts (or a mount and a local
// directory) are cross-device.
func TestEXDEV(t *testing.T) {
	c := startCluster(t, cluster0())
	a, b := mount(t, c), mount(t, c)
	f := filepath.Join(a, "f")
	if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, dst := range []string{filepath.Join(b, "g"), filepath.Join(t.TempDir(), "g")} {
		if err := os.Rename(f, dst); !errorIs(err, syscall.EXDEV) {
			t.Errorf("rename to %s: %v, want EXDEV", dst, err)
		}
		if err := os.Link(f, dst); !errorIs(err, syscall.EXDEV) {
			t.Errorf("link to %s: %v, want EXDEV", dst, err)
		}
	}
}

// populate creates the entries of the large directory dir (a path in the
// mount mnt) in the metadata store directly, from several goroutines.
func populate(c *cluster.Cluster, mnt, dir string, n int) error {
	ctx := context.Background()
	conn, err := cluster.Connect(ctx, c.Config.Dir, client.Options{})
	if err != nil {
		return err
	}
	defer conn.Close()
	rel, err := filepath.Rel(mnt, dir)
	if err != nil {
		return err
	}
	d, err := conn.Client.Resolve(ctx, rel)
	if err != nil {
		return err
	}
	const workers = 16
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		go func(w int) {
			for i := w; i < n; i += workers {
				name, isDir := posixtest.BigDirEntry(i)
				typ := meta.TypeFile
				if isDir {
					typ = meta.TypeDir
				}
				if _, err := c.Store.Create(ctx, d.Ino, name, typ, 0o755, 0, 0, 0, ""); err != nil {
					errs <- fmt.Errorf("entry %d: %w", i, err)
					return
				}
			}
			errs <- nil
		}(w)
	}
	for w := 0; w < workers; w++ {
		if err := <-errs; err != nil {
			return err
		}
	}
	return nil
}

// TestPOSIXMountKinds runs the checks of times and set-id bits on the
// other kinds of mount: page-cache writes (--cached-writes), requests
// over /dev/fuse instead of io_uring, and the metadata Store called in
// process (up --mount) instead of over RPC.
func TestPOSIXMountKinds(t *testing.T) {
	c := startCluster(t, cluster0())
	only := func(name string) bool {
		return strings.HasPrefix(name, "times_") || strings.HasPrefix(name, "setid_")
	}
	for _, k := range []struct {
		name  string
		mount func() string
	}{
		{"cached-writes", func() string {
			d, _ := mountWith(t, c, Options{AllowOther: true, URing: testURing(), CachedWrites: true})
			return d
		}},
		{"dev-fuse", func() string {
			d, _ := mountWith(t, c, Options{AllowOther: true})
			return d
		}},
		{"in-process", func() string { return mountInProcess(t, c) }},
	} {
		t.Run(k.name, func(t *testing.T) {
			dir := filepath.Join(k.mount(), k.name) // one cluster: a directory each
			if err := os.Mkdir(dir, 0o777); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, 0o777); err != nil {
				t.Fatal(err)
			}
			posixtest.Run(t, dir, posixtest.Options{Only: only})
		})
	}
}
