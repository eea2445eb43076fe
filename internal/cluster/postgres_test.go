package cluster

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"poolfs/internal/meta/pgtest"
	"poolfs/internal/meta/postgres"
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

// TestTwoClustersOneDatabase: a second cluster directory cannot start on
// a PostgreSQL database that another cluster uses; the refusal names both
// clusters and the way out, and the first cluster's files are untouched.
// A directory that lost its cluster id is refused the same way until the
// id is put back; a database and directory from before cluster ids are
// bound at their next start.
func TestTwoClustersOneDatabase(t *testing.T) {
	url := pgtest.Start(t)
	dirA, dirB := t.TempDir(), t.TempDir()
	a, conn := startTest(t, Config{Dir: dirA, Meta: url, Drives: 8, Scheme: "4+2", Unit: 64 << 10})
	data := randBytes(t, 1<<20+3)
	put(t, conn, "/a", data)
	idA, err := ReadID(dirA)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(dirA, "cluster-id")); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("cluster-id: %v %v, want mode 0600", st, err)
	}

	ctx := context.Background()
	refused := func(dir string) string {
		t.Helper()
		c, err := Start(ctx, Config{Dir: dir, Meta: url, Drives: 8, Scheme: "4+2", Unit: 64 << 10, Listen: "127.0.0.1:0", DriveSize: 1 << 30})
		if err == nil {
			c.Close()
			t.Fatalf("a second cluster (%s) started on the database of %s", dir, dirA)
		}
		if !errors.Is(err, postgres.ErrOtherCluster) {
			t.Fatalf("second cluster: %v, want ErrOtherCluster", err)
		}
		return err.Error()
	}
	msg := refused(dirB)
	idB, err := ReadID(dirB)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{idA, dirA, idB, dirB, "database of its own"} {
		if !strings.Contains(msg, want) {
			t.Errorf("refusal does not name %q:\n%s", want, msg)
		}
	}
	if got := get(t, conn, "/a"); !bytes.Equal(got, data) {
		t.Fatal("the first cluster's file changed")
	}
	conn.Close()
	a.Close()

	// The owner's directory without its id: refused until it is back.
	if err := os.Remove(filepath.Join(dirA, "cluster-id")); err != nil {
		t.Fatal(err)
	}
	msg = refused(dirA)
	if !strings.Contains(msg, "write "+idA+" into "+filepath.Join(dirA, "cluster-id")) {
		t.Fatalf("refusal does not say how to restore the id:\n%s", msg)
	}
	if err := os.WriteFile(filepath.Join(dirA, "cluster-id"), []byte(idA+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, conn = startTest(t, Config{Dir: dirA, Meta: url})
	if got := get(t, conn, "/a"); !bytes.Equal(got, data) {
		t.Fatal("file differs after the id was put back")
	}
	conn.Close()
	a.Close()

	// From before cluster ids: no binding, no id file. The first start
	// binds the database to the directory.
	pg, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pg.Exec(ctx, "DROP TABLE poolfs_cluster"); err != nil {
		t.Fatal(err)
	}
	pg.Close(ctx)
	os.Remove(filepath.Join(dirA, "cluster-id"))
	_, conn = startTest(t, Config{Dir: dirA, Meta: url})
	if got := get(t, conn, "/a"); !bytes.Equal(got, data) {
		t.Fatal("file differs after adopting the database")
	}
	newA, err := ReadID(dirA)
	if err != nil || newA == idA {
		t.Fatalf("cluster id after the start from before ids: %q %v", newA, err)
	}
	if msg := refused(dirB); !strings.Contains(msg, newA) {
		t.Fatalf("the adopted database is not bound to %s:\n%s", newA, msg)
	}
}
