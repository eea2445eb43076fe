package client_test

import (
	"context"
	"errors"
	"testing"

	"poolfs/internal/client"
	"poolfs/internal/meta"
)

// countingReader counts the bytes read from it.
type countingReader struct{ n int }

func (r *countingReader) Read(p []byte) (int, error) {
	r.n += len(p)
	return len(p), nil
}

// TestPutOntoDirectoryReadsNothing: a Put whose target is a directory is
// refused with meta.ErrIsDir before a byte of the source is read (it used
// to upload everything, then fail at the rename).
func TestPutOntoDirectoryReadsNothing(t *testing.T) {
	conn := start(t)
	ctx := context.Background()
	if err := conn.Client.Mkdir(ctx, "/d", 0o755, false); err != nil {
		t.Fatal(err)
	}
	r := &countingReader{}
	_, err := conn.Client.Put(ctx, "/d", r, client.PutOptions{Size: 1 << 20})
	if !errors.Is(err, meta.ErrIsDir) {
		t.Fatalf("put onto a directory: %v, want ErrIsDir", err)
	}
	if r.n != 0 {
		t.Fatalf("put read %d bytes of its source before refusing", r.n)
	}
	ents, err := conn.Client.ReadDir(ctx, "/")
	if err != nil || len(ents) != 1 || ents[0].Name != "d" {
		t.Fatalf("root after the refused put: %v %v, want only d", ents, err)
	}
}
