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
	for i := range 3 { // m+1 fragments of stripe 0
		key := erasure.FragmentKey{Ino: uint64(a.Ino), Stripe: 0, Gen: recs[0].Gen, Index: uint8(i)}
		drive := filepath.Join(c.Config.Dir, "drives", fmt.Sprintf("d%02d", recs[0].Drives[i]))
		filepath.Walk(drive, func(p string, info os.FileInfo, err error) error {
			if err != nil || !info.Mode().IsRegular() {
				return nil
			}
			if b, _ := os.ReadFile(p); len(b) > 0 {
				if h, err := erasure.DecodeHeader(b); err == nil && h.Key == key {
					os.Remove(p)
				}
			}
			return nil
		})
	}
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
