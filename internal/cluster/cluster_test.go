package cluster

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"poolfs/internal/chunkstore"
	"poolfs/internal/client"
	"poolfs/internal/erasure"
	"poolfs/internal/meta"
)

// startTest starts a cluster in a temporary directory on a free port and
// connects a client to it.
func startTest(t *testing.T, cfg Config) (*Cluster, *Conn) {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	cfg.Listen = "127.0.0.1:0"
	if cfg.DriveSize == 0 {
		cfg.DriveSize = 1 << 30
	}
	if cfg.GCInterval == 0 {
		cfg.GCInterval = time.Hour
	}
	ctx := context.Background()
	c, err := Start(ctx, cfg)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	conn, err := Connect(ctx, cfg.Dir, client.Options{})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	return c, conn
}

func randBytes(t *testing.T, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func put(t *testing.T, conn *Conn, p string, data []byte) {
	t.Helper()
	if _, err := conn.Client.Put(context.Background(), p, bytes.NewReader(data), client.PutOptions{Size: int64(len(data))}); err != nil {
		t.Fatalf("put %s: %v", p, err)
	}
}

func get(t *testing.T, conn *Conn, p string) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := conn.Client.Get(context.Background(), p, &buf, client.GetOptions{}); err != nil {
		t.Fatalf("get %s: %v", p, err)
	}
	return buf.Bytes()
}

func TestRoundTrip(t *testing.T) {
	_, conn := startTest(t, Config{Drives: 12, Unit: 64 << 10})
	stripe := 8 * (64 << 10)
	sizes := []struct {
		name string
		n    int
	}{
		{"empty", 0}, {"one byte", 1}, {"one block", 4096}, {"stripe minus 1", stripe - 1},
		{"one stripe", stripe}, {"stripe plus 1", stripe + 1}, {"many stripes", 7*stripe + 12345},
	}
	for _, tc := range sizes {
		t.Run(tc.name, func(t *testing.T) {
			data := randBytes(t, tc.n)
			p := fmt.Sprintf("/f-%d", tc.n)
			put(t, conn, p, data)
			got := get(t, conn, p)
			if !bytes.Equal(got, data) {
				t.Fatalf("%s: got %d bytes, want %d, content differs", p, len(got), len(data))
			}
			a, err := conn.Client.Resolve(context.Background(), p)
			if err != nil || a.Size != uint64(tc.n) {
				t.Fatalf("stat %s: size %d err %v, want %d", p, a.Size, err, tc.n)
			}
		})
	}
}

func TestNamespaceCommands(t *testing.T) {
	_, conn := startTest(t, Config{Drives: 11, Scheme: "4+2", Unit: 64 << 10})
	ctx := context.Background()
	cl := conn.Client
	if err := cl.Mkdir(ctx, "/a/b/c", 0o755, true); err != nil {
		t.Fatal(err)
	}
	data := randBytes(t, 300000)
	put(t, conn, "/a/b/c/f", data)
	put(t, conn, "/a/b/c/f", data[:1000]) // atomic replace
	if got := get(t, conn, "/a/b/c/f"); !bytes.Equal(got, data[:1000]) {
		t.Fatal("replaced file has wrong content")
	}
	if err := cl.Rename(ctx, "/a/b/c/f", "/a/g"); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Resolve(ctx, "/a/b/c/f"); !errors.Is(err, meta.ErrNotFound) {
		t.Fatalf("old name after mv: %v, want not found", err)
	}
	ents, err := cl.ReadDir(ctx, "/a")
	if err != nil || len(ents) != 2 || ents[0].Name != "b" || ents[1].Name != "g" {
		t.Fatalf("ls /a = %+v, %v", ents, err)
	}
	if err := cl.Remove(ctx, "/a/b"); !errors.Is(err, meta.ErrNotEmpty) {
		t.Fatalf("rm non-empty dir: %v, want ErrNotEmpty", err)
	}
	if err := cl.RemoveAll(ctx, "/a"); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Get(ctx, "/a/g", &bytes.Buffer{}, client.GetOptions{}); !errors.Is(err, meta.ErrNotFound) {
		t.Fatalf("get removed: %v", err)
	}
	if _, err := cl.Put(ctx, "/nodir/f", bytes.NewReader(data), client.PutOptions{Size: -1}); !errors.Is(err, meta.ErrNotFound) {
		t.Fatalf("put into missing dir: %v", err)
	}
}

// fragmentPath finds the file of one fragment on a drive directory.
func fragmentFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() && info.Size() >= 4096 {
			out = append(out, p)
		}
		return nil
	})
	return out
}

func TestCorruptFragmentIsRepaired(t *testing.T) {
	// Files format: the test edits fragment files.
	c, conn := startTest(t, Config{Drives: 12, Unit: 64 << 10, DriveFormat: chunkstore.FormatFiles})
	ctx := context.Background()
	data := randBytes(t, 8*(64<<10))
	put(t, conn, "/f", data)
	a, _ := conn.Client.Resolve(ctx, "/f")
	recs, err := conn.Meta.Stripes(ctx, a.Ino, 0, 0)
	if err != nil || len(recs) != 1 {
		t.Fatalf("stripes: %v %v", recs, err)
	}
	// Flip one bit in the data of fragment 3 on its drive.
	drive := filepath.Join(c.Config.Dir, "drives", fmt.Sprintf("d%02d", recs[0].Drives[3]))
	key := erasure.FragmentKey{Ino: uint64(a.Ino), Stripe: 0, Gen: recs[0].Gen, Index: 3}
	var victim string
	for _, f := range fragmentFiles(t, drive) {
		b, _ := os.ReadFile(f)
		if h, err := erasure.DecodeHeader(b); err == nil && h.Key == key {
			victim = f
		}
	}
	if victim == "" {
		t.Fatalf("fragment %v not found on %s", key, drive)
	}
	b, _ := os.ReadFile(victim)
	orig := append([]byte(nil), b...)
	b[erasure.HeaderSize(64<<10)+1000] ^= 0x10
	if err := os.WriteFile(victim, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := get(t, conn, "/f"); !bytes.Equal(got, data) {
		t.Fatal("degraded read returned wrong bytes")
	}
	// Read repair rewrites the fragment with its original content, in the
	// background.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if b2, _ := os.ReadFile(victim); bytes.Equal(b2, orig) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("corrupt fragment was not rewritten by read repair")
		}
	}
}

func TestDataLossNamesFileAndStripe(t *testing.T) {
	// Files format: the test edits fragment files.
	c, conn := startTest(t, Config{Drives: 12, Unit: 64 << 10, DriveFormat: chunkstore.FormatFiles})
	ctx := context.Background()
	data := randBytes(t, 3*8*(64<<10))
	put(t, conn, "/lost", data)
	a, _ := conn.Client.Resolve(ctx, "/lost")
	recs, _ := conn.Meta.Stripes(ctx, a.Ino, 1, 1)
	// Remove m+1 = 3 fragments of stripe 1.
	for i := 0; i < 3; i++ {
		drive := filepath.Join(c.Config.Dir, "drives", fmt.Sprintf("d%02d", recs[0].Drives[i]))
		for _, f := range fragmentFiles(t, drive) {
			b, _ := os.ReadFile(f)
			if h, err := erasure.DecodeHeader(b); err == nil && h.Key.Ino == uint64(a.Ino) && h.Key.Stripe == 1 {
				os.Remove(f)
			}
		}
	}
	_, err := conn.Client.Get(ctx, "/lost", &bytes.Buffer{}, client.GetOptions{})
	if !errors.Is(err, client.ErrDataLoss) {
		t.Fatalf("get with 3 of 10 fragments gone: %v, want ErrDataLoss", err)
	}
	if msg := err.Error(); !bytes.Contains([]byte(msg), []byte("/lost")) || !bytes.Contains([]byte(msg), []byte("stripe 1")) {
		t.Fatalf("data-loss error %q does not name the file and stripe", msg)
	}
}

func TestPoolFull(t *testing.T) {
	// 12 drives of 4 MiB, 2 preserved: client writes may fill each drive
	// to 60% (clustermap.WriteLimits: these drives hold ~60 fragments, so
	// the rebuild's spread needs a wide margin), ~23 MiB of user data.
	_, conn := startTest(t, Config{Drives: 12, Unit: 64 << 10, DriveSize: 4 << 20})
	ctx := context.Background()
	keep := randBytes(t, 12<<20)
	put(t, conn, "/keep", keep)
	big := randBytes(t, 16<<20)
	_, err := conn.Client.Put(ctx, "/big", bytes.NewReader(big), client.PutOptions{Size: int64(len(big))})
	if !errors.Is(err, client.ErrPoolFull) {
		t.Fatalf("put beyond capacity: %v, want pool full", err)
	}
	// Unknown size: refused at commit time.
	_, err = conn.Client.Put(ctx, "/big", bytes.NewReader(big), client.PutOptions{Size: -1})
	if !errors.Is(err, client.ErrPoolFull) {
		t.Fatalf("streamed put beyond capacity: %v, want pool full", err)
	}
	if _, err := conn.Client.Resolve(ctx, "/big"); !errors.Is(err, meta.ErrNotFound) {
		t.Fatalf("refused put left a file: %v", err)
	}
	if got := get(t, conn, "/keep"); !bytes.Equal(got, keep) {
		t.Fatal("data written before the pool filled was damaged")
	}
}

func TestRestartKeepsData(t *testing.T) {
	dir := t.TempDir()
	c, conn := startTest(t, Config{Dir: dir, Drives: 12, Unit: 64 << 10})
	data := randBytes(t, 1<<20+7)
	put(t, conn, "/persist", data)
	conn.Close()
	c.Close()
	_, conn2 := startTest(t, Config{Dir: dir})
	if got := get(t, conn2, "/persist"); !bytes.Equal(got, data) {
		t.Fatal("data changed across restart")
	}
}

// prng is a fast deterministic byte stream (the AES-CTR keystream of a
// key made from s), so a 1 GiB file needs no 1 GiB buffer and no slow
// crypto randomness; the keystream is written by assembly, which the race
// detector does not instrument byte by byte.
type prng struct {
	s      uint64
	left   int64
	stream cipher.Stream
}

func (p *prng) Read(b []byte) (int, error) {
	if p.left == 0 {
		return 0, io.EOF
	}
	if p.stream == nil {
		key := make([]byte, 16)
		binary.LittleEndian.PutUint64(key, p.s)
		blk, err := aes.NewCipher(key)
		if err != nil {
			return 0, err
		}
		p.stream = cipher.NewCTR(blk, make([]byte, aes.BlockSize))
	}
	if int64(len(b)) > p.left {
		b = b[:p.left]
	}
	clear(b)
	p.stream.XORKeyStream(b, b)
	p.left -= int64(len(b))
	return len(b), nil
}

// TestRoundTrip1GiB puts 1 GiB and gets it back: the sha256 of what the
// put read from its source equals that of what the get returned, and the
// put read the whole source.
func TestRoundTrip1GiB(t *testing.T) {
	_, conn := startTest(t, Config{Drives: 12, DriveSize: 1 << 30})
	const size = 1 << 30
	want := sha256.New()
	src := &prng{s: 42, left: size}
	ctx := context.Background()
	if _, err := conn.Client.Put(ctx, "/big", io.TeeReader(src, want), client.PutOptions{Size: size}); err != nil {
		t.Fatal(err)
	}
	if src.left != 0 {
		t.Fatalf("put read %d of %d bytes of its source", size-src.left, size)
	}
	got := sha256.New()
	a, err := conn.Client.Get(ctx, "/big", got, client.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a.Size != size || !bytes.Equal(got.Sum(nil), want.Sum(nil)) {
		t.Fatalf("1 GiB round trip: size %d, sha256 %x, want %x", a.Size, got.Sum(nil), want.Sum(nil))
	}
}
