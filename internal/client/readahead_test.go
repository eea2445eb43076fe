package client_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"poolfs/internal/client"
)

// TestReadAheadBudget: files read at once share the client's read-ahead
// budget (Options.ReadAheadTotal, smaller here than their windows
// together): they read ahead while it lasts, every byte still arrives
// (readers fill what they ask for themselves), and closing the files gives
// every stripe back.
func TestReadAheadBudget(t *testing.T) {
	const total = 6
	conn := startWith(t, client.Options{ReadAhead: 4, ReadAheadTotal: total})
	ctx := context.Background()
	const stripe = 4 * 64 << 10
	const n = 3
	var files []*client.File
	var want [][]byte
	for i := range n {
		w, data := written(t, conn, string(rune('a'+i)), 12*stripe)
		f := reopen(t, conn, w)
		files, want = append(files, f), append(want, data)
	}
	got := make([][]byte, n)
	for i := range got {
		got[i] = make([]byte, len(want[i]))
	}
	held := 0
	// The files in turn, 64 KiB at a time: each keeps a stream going.
	for off := 0; off < len(want[0]); off += 64 << 10 {
		for i, f := range files {
			if k, err := f.ReadAt(ctx, got[i][off:off+64<<10], int64(off)); err != nil || k != 64<<10 {
				t.Fatalf("file %d at %d: %d, %v", i, off, k, err)
			}
			held = max(held, conn.Client.ReadAheadHeld())
		}
	}
	for i := range files {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("file %d: content differs", i)
		}
	}
	if held == 0 {
		t.Fatal("nothing was read ahead")
	}
	for _, f := range files {
		f.Close()
	}
	// Stripes still being read come back when their reads end.
	deadline := time.Now().Add(10 * time.Second)
	for conn.Client.ReadAheadHeld() != 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if h := conn.Client.ReadAheadHeld(); h != 0 {
		t.Fatalf("%d read-ahead stripes still held after every file was closed", h)
	}
}
