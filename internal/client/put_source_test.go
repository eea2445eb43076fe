package client_test

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"poolfs/internal/client"
)

// overlapSource is a file-like source (io.ReaderAt) that notes whether two
// of its reads were ever in flight at once: the first read waits (up to a
// second) for a second one. Its sequential Read fails: a file is to be read
// by offset.
type overlapSource struct {
	b        []byte
	mu       sync.Mutex
	inflight int
	overlap  bool
}

func (s *overlapSource) Read([]byte) (int, error) {
	return 0, errors.New("a file source read in order, one stripe after another")
}

func (s *overlapSource) ReadAt(p []byte, off int64) (int, error) {
	s.mu.Lock()
	s.inflight++
	if s.inflight > 1 {
		s.overlap = true
	}
	for deadline := time.Now().Add(time.Second); !s.overlap && time.Now().Before(deadline); {
		s.mu.Unlock()
		time.Sleep(time.Millisecond)
		s.mu.Lock()
	}
	s.inflight--
	s.mu.Unlock()
	return bytes.NewReader(s.b).ReadAt(p, off)
}

// TestPutReadsFileInParallel: Put reads a file source (an io.ReaderAt of
// known size) several stripes at once, ahead of the write-behind, and
// stores it byte for byte.
func TestPutReadsFileInParallel(t *testing.T) {
	conn := start(t)
	ctx := context.Background()
	for _, n := range []int{0, 1000, 256 << 10, 11*(256<<10) + 4321} {
		data := make([]byte, n)
		for i := range data {
			data[i] = byte(rand.Uint32())
		}
		src := &overlapSource{b: data}
		a, err := conn.Client.Put(ctx, "/f", src, client.PutOptions{Size: int64(n)})
		if err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		if a.Size != uint64(n) {
			t.Fatalf("put returned size %d, want %d", a.Size, n)
		}
		var got bytes.Buffer
		if _, err := conn.Client.Get(ctx, "/f", &got, client.GetOptions{}); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), data) {
			t.Fatalf("%d bytes put, %d read back, or they differ", n, got.Len())
		}
		if n > 2*(256<<10) && !src.overlap {
			t.Fatalf("%d bytes: the source's stripes were read one at a time", n)
		}
	}
}
