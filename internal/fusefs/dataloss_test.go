package fusefs

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"poolfs/internal/testlog"
	"strings"
	"syscall"
	"testing"

	"poolfs/internal/chunkstore"
	"poolfs/internal/client"
	"poolfs/internal/cluster"
	"poolfs/internal/erasure"
	"poolfs/internal/meta"
)

// TestDataLossNamesThePath: a read through the mount of a stripe that lost
// more fragments than parity covers fails with EIO, and the error the
// mount logs names the file by its path in the mount (not an empty name).
func TestDataLossNamesThePath(t *testing.T) {
	c := startCluster(t, cluster.Config{Drives: 8, Scheme: "4+2", Unit: 64 << 10, DriveFormat: chunkstore.FormatFiles})
	ctx := context.Background()
	conn, err := cluster.Connect(ctx, c.Config.Dir, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.Client.Mkdir(ctx, "/d", 0o755, false); err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 4*(64<<10))
	rand.Read(data)
	if _, err := conn.Client.Put(ctx, "/d/f", bytes.NewReader(data), client.PutOptions{Size: int64(len(data))}); err != nil {
		t.Fatal(err)
	}
	a, err := conn.Client.Resolve(ctx, "/d/f")
	if err != nil {
		t.Fatal(err)
	}
	recs, err := conn.Meta.Stripes(ctx, a.Ino, 0, 0)
	if err != nil || len(recs) != 1 {
		t.Fatalf("stripes: %v %v", recs, err)
	}
	removeFragments(t, c, a.Ino, recs[0], 3) // m+1 fragments of stripe 0
	logs := &testlog.Buffer{}
	dir, _ := mountWith(t, c, Options{AllowOther: true, URing: testURing(),
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	_, err = os.ReadFile(filepath.Join(dir, "d", "f"))
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("read of a lost stripe through the mount: %v, want EIO", err)
	}
	if out := logs.String(); !strings.Contains(out, "file /d/f stripe 0") {
		t.Fatalf("mount log does not name /d/f:\n%s", out)
	}
}

// removeFragments deletes the first n fragments of the stripe of rec from
// c's drives (FormatFiles: a file each).
func removeFragments(t *testing.T, c *cluster.Cluster, ino meta.Ino, rec meta.StripeRec, n int) {
	t.Helper()
	removed := 0
	for i := range n {
		key := erasure.FragmentKey{Ino: uint64(ino), Stripe: rec.Stripe, Gen: rec.Gen, Index: uint8(i)}
		drive := filepath.Join(c.Config.Dir, "drives", fmt.Sprintf("d%02d", rec.Drives[i]))
		filepath.Walk(drive, func(p string, info os.FileInfo, err error) error {
			if err != nil || !info.Mode().IsRegular() {
				return nil
			}
			if b, _ := os.ReadFile(p); len(b) > 0 {
				if h, err := erasure.DecodeHeader(b); err == nil && h.Key == key && os.Remove(p) == nil {
					removed++
				}
			}
			return nil
		})
	}
	if removed != n {
		t.Fatalf("removed %d fragments of stripe %d, want %d", removed, rec.Stripe, n)
	}
}

// TestReadOverLostStripeIsAnError: a read that spans a readable stripe
// and a lost one fails with EIO; it is not answered with the readable
// stripe's bytes alone, which the kernel would take for the end of the
// file. The descriptor has unflushed writes in the range, so the read is
// the one done with the file's mutex held (unflushed bytes laid over).
func TestReadOverLostStripeIsAnError(t *testing.T) {
	const unit, sb = 64 << 10, 4 * 64 << 10
	c := startCluster(t, cluster.Config{Drives: 8, Scheme: "4+2", Unit: unit, DriveFormat: chunkstore.FormatFiles})
	ctx := context.Background()
	conn, err := cluster.Connect(ctx, c.Config.Dir, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	data := make([]byte, 2*sb)
	rand.Read(data)
	if _, err := conn.Client.Put(ctx, "/f", bytes.NewReader(data), client.PutOptions{Size: int64(len(data))}); err != nil {
		t.Fatal(err)
	}
	a, err := conn.Client.Resolve(ctx, "/f")
	if err != nil {
		t.Fatal(err)
	}
	recs, err := conn.Meta.Stripes(ctx, a.Ino, 0, 1)
	if err != nil || len(recs) != 2 {
		t.Fatalf("stripes: %v %v", recs, err)
	}
	removeFragments(t, c, a.Ino, recs[1], 3) // m+1 of stripe 1
	dir := mount(t, c)
	f, err := os.OpenFile(filepath.Join(dir, "f"), os.O_RDWR, 0) // direct: one READ request
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte("unflushed"), 0); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 2*sb)
	// One pread(2): os.File.ReadAt would go on after a short read and
	// meet the error on its own.
	n, err := syscall.Pread(int(f.Fd()), got, 0)
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("read over a lost stripe: %d bytes, %v; want EIO", n, err)
	}
	// The readable stripe still reads, with the unflushed bytes.
	want := append([]byte("unflushed"), data[9:sb]...)
	if n, err := f.ReadAt(got[:sb], 0); err != nil || !bytes.Equal(got[:n], want) {
		t.Fatalf("read of the readable stripe: %d bytes, %v, equal %v", n, err, bytes.Equal(got[:n], want))
	}
}
