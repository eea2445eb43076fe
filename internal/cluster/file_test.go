package cluster

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"testing"

	"poolfs/internal/client"
	"poolfs/internal/meta"
)

// createFile makes an empty file and opens it.
func createFile(t *testing.T, conn *Conn, name string) *client.File {
	t.Helper()
	ctx := context.Background()
	a, err := conn.Meta.Create(ctx, meta.RootIno, name, meta.TypeFile, 0o644, 0, 0, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	f, err := conn.Client.Open(ctx, a.Ino, name)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func reopen(t *testing.T, conn *Conn, f *client.File) *client.File {
	t.Helper()
	g, err := conn.Client.Open(context.Background(), f.Attr().Ino, "reopened")
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func readAll(t *testing.T, f *client.File) []byte {
	t.Helper()
	size := f.Attr().Size
	out := make([]byte, size)
	n, err := f.ReadAt(context.Background(), out, 0)
	if err != nil && err != io.EOF || n != int(size) {
		t.Fatalf("read %d of %d: %v", n, size, err)
	}
	return out
}

// TestFileRandomIO applies random writes, truncates and reads to a file
// and to a byte slice, and checks they agree, across reopen.
func TestFileRandomIO(t *testing.T) {
	_, conn := startTest(t, Config{Drives: 11, Scheme: "4+2", Unit: 16 << 10})
	ctx := context.Background()
	f := createFile(t, conn, "rand")
	var model []byte
	rng := rand.New(rand.NewPCG(1, 2))
	sb := 4 * (16 << 10)
	for step := 0; step < 300; step++ {
		switch op := rng.IntN(10); {
		case op < 6: // write
			off := rng.IntN(5 * sb)
			p := make([]byte, 1+rng.IntN(sb))
			for i := range p {
				p[i] = byte(rng.Uint32())
			}
			if _, err := f.WriteAt(ctx, p, int64(off)); err != nil {
				t.Fatal(err)
			}
			if end := off + len(p); end > len(model) {
				model = append(model, make([]byte, end-len(model))...)
			}
			copy(model[off:], p)
		case op < 7: // truncate
			size := rng.IntN(5 * sb)
			if err := f.Truncate(ctx, int64(size)); err != nil {
				t.Fatal(err)
			}
			if size < len(model) {
				model = model[:size]
			} else {
				model = append(model, make([]byte, size-len(model))...)
			}
		case op < 9: // read a range
			off := rng.IntN(len(model) + 1)
			p := make([]byte, rng.IntN(sb))
			n, err := f.ReadAt(ctx, p, int64(off))
			if err != nil && err != io.EOF {
				t.Fatal(err)
			}
			want := model[off:min(len(model), off+len(p))]
			if !bytes.Equal(p[:n], want) {
				t.Fatalf("step %d: read %d at %d differs", step, len(p), off)
			}
		default: // flush and reopen
			if err := f.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			f = reopen(t, conn, f)
			if got := readAll(t, f); !bytes.Equal(got, model) {
				i := 0
				for i < len(got) && i < len(model) && got[i] == model[i] {
					i++
				}
				j := len(got) - 1
				for j >= 0 && j < len(model) && got[j] == model[j] {
					j--
				}
				t.Fatalf("step %d: after reopen: %d bytes, want %d, content differs in [%d, %d]", step, len(got), len(model), i, j)
			}
		}
	}
	if err := f.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := conn.Client.Get(ctx, "/rand", &buf, client.GetOptions{}); err != nil || !bytes.Equal(buf.Bytes(), model) {
		t.Fatalf("get after random I/O: %v", err)
	}
}

// TestSharedFileWriters has several clients (as several mounts would)
// write disjoint ranges of one file, segmented and strided, with transfer
// sizes not aligned to the stripe; the file must hold exactly every
// writer's bytes.
func TestSharedFileWriters(t *testing.T) {
	c, conn := startTest(t, Config{Drives: 12, Unit: 16 << 10})
	ctx := context.Background()
	a, err := conn.Meta.Create(ctx, meta.RootIno, "shared", meta.TypeFile, 0o644, 0, 0, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	const writers, xfer, blocks = 4, 5000, 24 // 5000-byte transfers: never stripe-aligned
	for _, pattern := range []string{"segmented", "strided"} {
		t.Run(pattern, func(t *testing.T) {
			var wg sync.WaitGroup
			errs := make([]error, writers)
			for w := 0; w < writers; w++ {
				wg.Add(1)
				go func(w int) {
					defer wg.Done()
					cn, err := Connect(ctx, c.Config.Dir, client.Options{})
					if err != nil {
						errs[w] = err
						return
					}
					defer cn.Close()
					f, err := cn.Client.Open(ctx, a.Ino, "shared")
					if err != nil {
						errs[w] = err
						return
					}
					for b := 0; b < blocks; b++ {
						off := offsetOf(pattern, w, b, writers, blocks, xfer)
						if _, err := f.WriteAt(ctx, pattern2bytes(pattern, w, b, xfer), off); err != nil {
							errs[w] = err
							return
						}
						if b%5 == 4 { // flush now and then, as fsync or a full buffer would
							if err := f.Flush(ctx); err != nil {
								errs[w] = err
								return
							}
						}
					}
					errs[w] = f.Flush(ctx)
				}(w)
			}
			wg.Wait()
			for w, err := range errs {
				if err != nil {
					t.Fatalf("writer %d: %v", w, err)
				}
			}
			f, err := conn.Client.Open(ctx, a.Ino, "shared")
			if err != nil {
				t.Fatal(err)
			}
			got := readAll(t, f)
			if len(got) != writers*blocks*xfer {
				t.Fatalf("size %d, want %d", len(got), writers*blocks*xfer)
			}
			for w := 0; w < writers; w++ {
				for b := 0; b < blocks; b++ {
					off := offsetOf(pattern, w, b, writers, blocks, xfer)
					if !bytes.Equal(got[off:off+xfer], pattern2bytes(pattern, w, b, xfer)) {
						t.Fatalf("writer %d block %d at %d lost", w, b, off)
					}
				}
			}
		})
	}
}

func offsetOf(pattern string, w, b, writers, blocks, xfer int) int64 {
	if pattern == "segmented" {
		return int64((w*blocks + b) * xfer)
	}
	return int64((b*writers + w) * xfer)
}

func pattern2bytes(pattern string, w, b, xfer int) []byte {
	p := make([]byte, xfer)
	s := fmt.Sprintf("%s w%d b%d|", pattern, w, b)
	for i := range p {
		p[i] = s[i%len(s)]
	}
	return p
}
