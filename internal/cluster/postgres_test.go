package cluster

import (
	"bytes"
	"context"
	"testing"

	"poolfs/internal/meta/pgtest"
)

// TestPostgresMetadata runs a cluster on a real PostgreSQL server: round
// trips, random I/O and a restart keep every byte.
func TestPostgresMetadata(t *testing.T) {
	url := pgtest.Start(t)
	dir := t.TempDir()
	c, conn := startTest(t, Config{Dir: dir, Meta: url, Drives: 12, Unit: 64 << 10})
	data := randBytes(t, 3*8*(64<<10)+99)
	put(t, conn, "/pg", data)
	if got := get(t, conn, "/pg"); !bytes.Equal(got, data) {
		t.Fatal("round trip through PostgreSQL metadata differs")
	}
	f := createFile(t, conn, "rw")
	ctx := context.Background()
	if _, err := f.WriteAt(ctx, data[:70000], 12345); err != nil {
		t.Fatal(err)
	}
	if err := f.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	c.Close()
	_, conn2 := startTest(t, Config{Dir: dir, Meta: url})
	if got := get(t, conn2, "/pg"); !bytes.Equal(got, data) {
		t.Fatal("data changed across restart")
	}
	got := get(t, conn2, "/rw")
	if len(got) != 12345+70000 || !bytes.Equal(got[12345:], data[:70000]) || !bytes.Equal(got[:12345], make([]byte, 12345)) {
		t.Fatal("sparse write through PostgreSQL metadata differs")
	}
}
