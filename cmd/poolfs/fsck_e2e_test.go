package main

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"poolfs/internal/chunkstore"
	"poolfs/internal/client"
	"poolfs/internal/cluster"
	"poolfs/internal/erasure"
	"poolfs/internal/meta"
	"poolfs/internal/meta/sqlite"
	"poolfs/internal/placement"
	"poolfs/internal/rpc"
	"poolfs/internal/storage"
)

// deleteStripeRecords removes every stripe record of the files inos from
// the stopped cluster's store, as a damaged or wrongly restored store
// loses them.
func deleteStripeRecords(t *testing.T, dir string, inos ...uint64) {
	t.Helper()
	e, err := sqlite.Open(filepath.Join(dir, "meta.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	n := 0
	err = e.Update(context.Background(), func(tx meta.Tx) error {
		n = 0
		for _, ino := range inos {
			p := stripeKey(ino)
			var keys [][]byte
			err := tx.Scan(p, append(p[:len(p):len(p)], 0xff), 0, func(k, _ []byte) bool {
				keys = append(keys, append([]byte(nil), k...))
				return true
			})
			if err != nil {
				return err
			}
			for _, k := range keys {
				if err := tx.Delete(k); err != nil {
					return err
				}
				n++
			}
		}
		return nil
	})
	if err != nil || n == 0 {
		t.Fatalf("deleted %d stripe records: %v", n, err)
	}
	t.Logf("deleted %d stripe records", n)
}

// fsckRun runs poolfs fsck and returns its output and whether it passed.
func fsckRun(t *testing.T, dir string, args ...string) (string, bool) {
	t.Helper()
	out, err := exec.Command(binary, append([]string{"fsck", "-c", dir}, args...)...).CombinedOutput()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	return string(out), err == nil
}

// TestFsckRebuildStripes: stripe records deleted from a stopped cluster's
// store are reported by path, recreated by fsck --rebuild-stripes from
// the fragment headers, and every file reads back byte for byte.
func TestFsckRebuildStripes(t *testing.T) {
	dir := t.TempDir()
	up := startUp(t, dir, "--drives", "12", "--drive-size", "1G", "--unit", "64K")
	files := putFiles(t, dir, 24)
	if out, ok := fsckRun(t, dir); !ok || !strings.Contains(out, "0 problems") {
		t.Fatalf("fsck of a sound running cluster:\n%s", out)
	}
	victims := []string{"/d0/f3", "/d1/f7", "/d2/f2", "/d1/f1"} // 600K+3, 600K+3, 70K, 5000 bytes
	var inos []uint64
	for _, v := range victims {
		inos = append(inos, inodeOf(t, dir, v))
	}
	up.stop(t)
	deleteStripeRecords(t, dir, inos...)

	out, ok := fsckRun(t, dir)
	if ok {
		t.Fatalf("fsck passed a store that lost stripe records:\n%s", out)
	}
	for _, v := range victims {
		if !strings.Contains(out, "lost-record: "+v+":") {
			t.Fatalf("fsck does not report %s's lost records:\n%s", v, out)
		}
	}
	out, ok = fsckRun(t, dir, "--rebuild-stripes")
	if !ok || !strings.Contains(out, "6 stripe records restored") {
		t.Fatalf("fsck --rebuild-stripes:\n%s", out)
	}
	t.Logf("fsck --rebuild-stripes:\n%s", out)
	if out, ok := fsckRun(t, dir); !ok {
		t.Fatalf("fsck after the rebuild:\n%s", out)
	}
	startUp(t, dir)
	checkFiles(t, dir, files)
}

// TestFsckOnlineRepair: with the cluster running, fragments deleted from
// the drives are reported by fsck by path, re-written from the others by
// fsck --repair, and a second fsck finds nothing.
func TestFsckOnlineRepair(t *testing.T) {
	dir := t.TempDir()
	startUp(t, dir, "--drives", "12", "--drive-size", "1G", "--unit", "64K")
	files := putFiles(t, dir, 8)
	ino := meta.Ino(inodeOf(t, dir, "/d1/f7")) // two stripes
	ctx := context.Background()
	conn, err := cluster.Connect(ctx, dir, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	recs, err := conn.Meta.Stripes(ctx, ino, 0, 1)
	if err != nil || len(recs) != 2 {
		t.Fatalf("stripes: %v, %v", recs, err)
	}
	m, err := conn.Mgmt.Map(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, secret, err := cluster.ReadInfo(dir)
	if err != nil {
		t.Fatal(err)
	}
	d := storage.NewDialer(secret, rpc.ClientOptions{})
	defer d.Close()
	type frag struct {
		drive chunkstore.Drive
		key   erasure.FragmentKey
	}
	var gone []frag
	for i, rec := range recs {
		idx := 2 + 3*i
		drv, err := d.Drive(m, placement.DriveID(rec.Drives[idx]))
		if err != nil {
			t.Fatal(err)
		}
		key := erasure.FragmentKey{Ino: uint64(ino), Stripe: rec.Stripe, Gen: rec.Gen, Index: uint8(idx)}
		if err := drv.DeleteFragment(ctx, key); err != nil {
			t.Fatal(err)
		}
		gone = append(gone, frag{drv, key})
	}
	out, ok := fsckRun(t, dir)
	if ok || strings.Count(out, "missing-fragments: /d1/f7:") != 2 {
		t.Fatalf("fsck of a cluster missing 2 fragments:\n%s", out)
	}
	out, ok = fsckRun(t, dir, "--repair")
	if !ok || !strings.Contains(out, "2 fragments re-written") {
		t.Fatalf("fsck --repair:\n%s", out)
	}
	t.Logf("fsck --repair:\n%s", out)
	for _, f := range gone {
		if _, err := f.drive.ReadFragment(ctx, f.key, 0, -1, nil); err != nil {
			t.Fatalf("fragment %v not re-written: %v", f.key, err)
		}
	}
	if out, ok := fsckRun(t, dir); !ok || !strings.Contains(out, "0 problems") {
		t.Fatalf("fsck after the repair:\n%s", out)
	}
	checkFiles(t, dir, files)
}

// TestRestoreOlderBackupThenRebuild: a file rewritten in place after the
// backup was taken, and the collector gone over its old generation: the
// restored backup names a generation no longer on the drives; fsck reports
// the stripe unreadable by path, and fsck --rebuild-stripes puts the newer
// generation found on the drives in its place, so the file reads back as
// last written.
func TestRestoreOlderBackupThenRebuild(t *testing.T) {
	requireFUSE(t)
	dir := t.TempDir()
	mnt := filepath.Join(t.TempDir(), "mnt")
	os.Mkdir(mnt, 0o755)
	up := startUp(t, dir, "--drives", "12", "--drive-size", "1G", "--unit", "64K", "--mount", mnt)
	waitMounted(t, mnt, up.out.String)
	data := make([]byte, 600<<10+3)
	crand.Read(data)
	p := filepath.Join(mnt, "f")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	bak := filepath.Join(t.TempDir(), "bak.db")
	run(t, "meta", "backup", "-c", dir, bak)
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Rewriting most of stripe 0 (512 KiB stripes) makes a new generation
	// of it; a small write would go to the delta log (docs/small-writes.md)
	// and replace no generation.
	patch := bytes.Repeat([]byte("new"), 100<<10)
	at := 100 << 10
	copy(data[at:], patch)
	if _, err := f.WriteAt(patch, int64(at)); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(f.Sync(), f.Close()); err != nil {
		t.Fatal(err)
	}
	if out := run(t, "gc", "-c", dir); !strings.Contains(out, "gc: 1 queued") {
		t.Fatalf("gc did not collect the replaced generation: %s", out)
	}
	up.stop(t)

	run(t, "meta", "restore", "-c", dir, bak)
	out, ok := fsckRun(t, dir)
	if ok || !strings.Contains(out, "unreadable-stripe: /f:") {
		t.Fatalf("fsck of the restored store:\n%s", out)
	}
	out, ok = fsckRun(t, dir, "--rebuild-stripes")
	if !ok || !strings.Contains(out, "1 stripe records restored") {
		t.Fatalf("fsck --rebuild-stripes:\n%s", out)
	}
	t.Logf("fsck --rebuild-stripes:\n%s", out)
	startUp(t, dir)
	checkFiles(t, dir, map[string][]byte{"/f": data})
}
