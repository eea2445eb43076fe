package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"poolfs/internal/chunkstore"
	"poolfs/internal/client"
	"poolfs/internal/cluster"
	"poolfs/internal/erasure"
	"poolfs/internal/meta/sqlite/sqlitetest"
)

// putFiles puts n files of varied sizes (one byte to several stripes)
// into the running cluster in dir and returns their contents by path. The
// files go through one client connection (the CLI's put has tests of its
// own), so that the fixture costs no process start per file.
func putFiles(t *testing.T, dir string, n int) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	run(t, "mkdir", "-c", dir, "-p", "/d0", "/d1", "/d2")
	conn := connectTo(t, dir)
	defer conn.Close()
	for i := 0; i < n; i++ {
		size := []int{1, 5000, 70 << 10, 600<<10 + 3}[i%4]
		name := fmt.Sprintf("/d%d/f%d", i%3, i)
		b := make([]byte, size)
		rand.Read(b)
		if _, err := conn.Client.Put(context.Background(), name, bytes.NewReader(b), client.PutOptions{Size: int64(size)}); err != nil {
			t.Fatalf("put %s: %v", name, err)
		}
		files[name] = b
	}
	return files
}

// checkFiles reads every file back through the running cluster (one
// client connection) and compares it byte for byte.
func checkFiles(t *testing.T, dir string, files map[string][]byte) {
	t.Helper()
	conn := connectTo(t, dir)
	defer conn.Close()
	for name, want := range files {
		if got := getBytes(t, conn, name); !bytes.Equal(got, want) {
			t.Fatalf("%s: read %d bytes differing from the %d written", name, len(got), len(want))
		}
	}
}

// connectTo connects a client to the running cluster in dir; the caller
// closes it.
func connectTo(t *testing.T, dir string) *cluster.Conn {
	t.Helper()
	conn, err := cluster.Connect(context.Background(), dir, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

// fragmentsOn lists the fragment keys on the drives of a stopped cluster.
func fragmentsOn(t *testing.T, dir string) []string {
	t.Helper()
	drives, _ := filepath.Glob(filepath.Join(dir, "drives", "*"))
	var keys []string
	for _, d := range drives {
		ld, err := chunkstore.Open(d, chunkstore.Options{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		err = ld.ListFragments(context.Background(), func(k erasure.FragmentKey, _ int64, _ time.Time) error {
			keys = append(keys, filepath.Base(d)+":"+k.String())
			return nil
		})
		ld.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(keys)
	return keys
}

// inodeOf returns the inode number of path in the running cluster.
func inodeOf(t *testing.T, dir, path string) uint64 {
	t.Helper()
	m := regexp.MustCompile(`inode:\s+(\d+)`).FindStringSubmatch(run(t, "stat", "-c", dir, path))
	if m == nil {
		t.Fatalf("no inode in stat of %s", path)
	}
	n, _ := strconv.ParseUint(m[1], 10, 64)
	return n
}

// stripeKey is the metadata key prefix of a file's stripe records.
func stripeKey(ino uint64) []byte {
	return append([]byte{'s'}, byte(ino>>56), byte(ino>>48), byte(ino>>40), byte(ino>>32), byte(ino>>24), byte(ino>>16), byte(ino>>8), byte(ino))
}

// corruptCluster makes a cluster of 60 files, stops it, keeps a copy of
// its good meta.db and damages the B-tree pages of meta.db that hold one
// file's stripe records (and its neighbours'). It returns the cluster
// directory, the files and the good copy.
func corruptCluster(t *testing.T) (string, map[string][]byte, string) {
	dir := t.TempDir()
	up := startUp(t, dir, "--drives", "12", "--drive-size", "1G", "--unit", "64K")
	files := putFiles(t, dir, 60)
	victim := inodeOf(t, dir, "/d1/f25")
	up.stop(t)
	db := filepath.Join(dir, "meta.db")
	good := filepath.Join(t.TempDir(), "good.db")
	b, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(good, b, 0o600); err != nil {
		t.Fatal(err)
	}
	pages, err := sqlitetest.CorruptLeafPages(db, stripeKey(victim))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("damaged pages %v of meta.db", pages)
	return dir, files, good
}

// upRefuses checks that `up` refuses the corrupt store with the way out.
func upRefuses(t *testing.T, dir string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, binary, "up", "-c", dir, "--listen", "127.0.0.1:0").CombinedOutput()
	if err == nil {
		t.Fatalf("up on a corrupt store started:\n%s", out)
	}
	for _, want := range []string{"metadata store is corrupt", "meta restore", "fsck --rebuild-stripes", "fsck --salvage"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("up's refusal lacks %q:\n%s", want, out)
		}
	}
	t.Logf("up refused:\n%s", out)
}

// TestCorruptMetaStoreRefused: damaged B-tree pages of a stopped cluster's
// meta.db (the pages holding a file's stripe records) make `up` refuse
// with the way out, change nothing on the drives, and restoring the good
// meta.db brings every file back byte for byte.
func TestCorruptMetaStoreRefused(t *testing.T) {
	dir, files, good := corruptCluster(t)
	before := fragmentsOn(t, dir)
	upRefuses(t, dir)
	if after := fragmentsOn(t, dir); !slices.Equal(before, after) {
		t.Fatalf("fragments changed: %d before, %d after", len(before), len(after))
	}
	run(t, "meta", "restore", "-c", dir, good)
	startUp(t, dir)
	checkFiles(t, dir, files)
}

// TestCorruptMetaStoreSalvage: without a backup, fsck --salvage
// --rebuild-stripes --repair rebuilds the corrupt store from its readable
// rows and the fragment headers, and every file reads back byte for byte.
func TestCorruptMetaStoreSalvage(t *testing.T) {
	dir, files, _ := corruptCluster(t)
	upRefuses(t, dir)
	out, ok := fsckRun(t, dir, "--salvage", "--rebuild-stripes", "--repair")
	t.Logf("fsck --salvage --rebuild-stripes --repair:\n%s", out)
	if !ok || !strings.Contains(out, "salvaged") || !strings.Contains(out, "stripe records restored") {
		t.Fatal("fsck --salvage did not rebuild the store")
	}
	startUp(t, dir)
	checkFiles(t, dir, files)
}

// copyTree copies the directory src to dst (regular files and
// directories).
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		if fi.IsDir() {
			return os.MkdirAll(to, 0o700)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, fi.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestMetaBackupRestoreNewCluster: a backup taken through the running
// cluster while a writer goes on is restored into a new cluster directory
// (the drives and secret copied, as docs/fsck-and-backup.md says), and
// every file written before the backup reads back byte for byte.
func TestMetaBackupRestoreNewCluster(t *testing.T) {
	dir := t.TempDir()
	up := startUp(t, dir, "--drives", "12", "--drive-size", "1G", "--unit", "64K")
	files := putFiles(t, dir, 40)

	stop := make(chan struct{})
	done := make(chan error)
	var written atomic.Int64
	go func() { // a writer that goes on during the backup
		src := filepath.Join(t.TempDir(), "w")
		b := make([]byte, 200<<10)
		if err := os.WriteFile(src, b, 0o600); err != nil {
			done <- err
			return
		}
		for i := 0; ; i++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			out, err := exec.Command(binary, "put", "-c", dir, src, fmt.Sprintf("/w%d", i)).CombinedOutput()
			if err != nil {
				done <- fmt.Errorf("put during backup: %v: %s", err, out)
				return
			}
			written.Add(1)
		}
	}()
	time.Sleep(300 * time.Millisecond)
	bak := filepath.Join(t.TempDir(), "meta-backup.db")
	before := written.Load()
	out := run(t, "meta", "backup", "-c", dir, bak)
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	t.Logf("%s; %d files written before it, %d in all", strings.TrimSpace(out), before, written.Load())
	for i := range before { // written before the backup began: in it
		files[fmt.Sprintf("/w%d", i)] = make([]byte, 200<<10)
	}
	if fi, err := os.Stat(bak); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("backup file: %v, mode %v; want 0600", err, fi.Mode().Perm())
	}
	up.stop(t)

	// A new cluster directory: the drives and the secret, then the backup.
	nd := filepath.Join(t.TempDir(), "restored")
	copyTree(t, filepath.Join(dir, "drives"), filepath.Join(nd, "drives"))
	b, err := os.ReadFile(filepath.Join(dir, "secret"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(nd, "secret"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	run(t, "meta", "restore", "-c", nd, bak)
	startUp(t, nd)
	checkFiles(t, nd, files)
}

// uvarintLen is the length of the unsigned varint at the start of b.
func uvarintLen(b []byte) int {
	n := 0
	for n < len(b) && b[n] >= 0x80 {
		n++
	}
	return n + 1
}

// TestDamagedStripeRecordIsAnError: one stripe record's value damaged in
// meta.db (its length lowered by 3; the page stays well-formed, so the
// store passes its integrity check) makes reading that file an error that
// names it, never zeros where bytes were written; the other files read
// back byte for byte.
func TestDamagedStripeRecordIsAnError(t *testing.T) {
	dir := t.TempDir()
	up := startUp(t, dir, "--drives", "12", "--drive-size", "1G", "--unit", "64K")
	files := putFiles(t, dir, 12)
	const victim = "/d1/f7" // 600 KiB + 3: stripe 1 holds 88 KiB + 3 bytes
	ino := inodeOf(t, dir, victim)
	up.stop(t)
	key := append(stripeKey(ino), 0, 0, 0, 0, 0, 0, 0, 1)
	n, err := sqlitetest.EditAfter(filepath.Join(dir, "meta.db"), key, func(v []byte) {
		at := 1 + uvarintLen(v[1:]) // format, gen
		at += uvarintLen(v[at:])    // PG; Len follows
		if v[at]&0x7f != 3 {
			t.Fatalf("stripe 1 length starts %#x, want low bits 3", v[at])
		}
		v[at] &^= 0x7f
	})
	if err != nil || n != 1 {
		t.Fatalf("edit stripe record: %d occurrences, %v", n, err)
	}
	startUp(t, dir)
	out, err := exec.Command(binary, "get", "-c", dir, victim, filepath.Join(t.TempDir(), "v")).CombinedOutput()
	if err == nil {
		t.Fatalf("get of a file whose stripe record is damaged succeeded: %s", out)
	}
	if !strings.Contains(string(out), fmt.Sprintf("inode %d", ino)) || !strings.Contains(string(out), "checksum") {
		t.Fatalf("get's error does not name the file and the damage: %s", out)
	}
	t.Logf("get %s: %s", victim, strings.TrimSpace(string(out)))
	delete(files, victim)
	checkFiles(t, dir, files)
}
