package client_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"poolfs/internal/client"
	"poolfs/internal/testlog"
)

// TestCloseStopsFolds: Close stops the folds running in the background
// and waits for them; the drives take no write after it returns, no fold
// reports an error for being stopped, and the file reads as written (the
// extents of the folds stopped stay in force).
func TestCloseStopsFolds(t *testing.T) {
	var logs testlog.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	conn := startWith(t, client.Options{StripesInFlight: 2, DeltaBudget: 256 << 10, FoldsInFlight: 2, Logger: log})
	ctx := context.Background()
	f, ref := written(t, conn, "f", 8<<10<<10)
	ino := f.Attr().Ino
	randomWrites(t, f, ref, 300, 8<<10)
	if err := f.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { conn.Client.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Close did not return")
	}
	writes := conn.Drives.Writes()
	time.Sleep(300 * time.Millisecond)
	if n := conn.Drives.Writes(); n != writes {
		t.Fatalf("the drives took %d writes after Close returned", n-writes)
	}
	f.WaitFolds() // returns at once: none runs
	if s := logs.String(); strings.Contains(s, "fold delta extents") || strings.Contains(s, "read repair") {
		t.Fatalf("stopped folds reported errors:\n%s", s)
	}
	checkFile(t, fresh(conn), ino, ref, "after Close stopped the folds")
}
