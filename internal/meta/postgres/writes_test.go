package postgres_test

import (
	"context"
	"fmt"
	"testing"

	"poolfs/internal/meta"
	"poolfs/internal/meta/metatest"
)

// TestWritesOneStatementPerRun: a transaction's writes go to the server
// as one statement per run of puts or of deletes in key order (a create's
// writes are one INSERT), not one statement per key; the values written
// and deleted are those asked for.
func TestWritesOneStatementPerRun(t *testing.T) {
	e := openPG(t)
	ctx := context.Background()
	put := func(tx meta.Tx, ks ...string) error {
		for _, k := range ks {
			if err := tx.Put([]byte(k), []byte("v"+k)); err != nil {
				return err
			}
		}
		return nil
	}
	if err := e.Update(ctx, func(tx meta.Tx) error { return put(tx, "a", "c", "e", "f", "h") }); err != nil {
		t.Fatal(err)
	}
	before := e.Stats()
	err := e.Update(ctx, func(tx meta.Tx) error {
		// In key order: puts a b, delete c, put d, deletes e f,
		// puts g h: five runs.
		if err := put(tx, "h", "g", "d", "b", "a"); err != nil {
			return err
		}
		for _, k := range []string{"f", "c", "e"} {
			if err := tx.Delete([]byte(k)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// BEGIN, five runs, COMMIT.
	if st := e.Stats().Statements - before.Statements; st != 7 {
		t.Errorf("8 writes in 5 runs took %d statements, want 7", st)
	}
	got := map[string]string{}
	err = e.View(ctx, func(tx meta.Tx) error {
		return tx.Scan(nil, nil, 0, func(k, v []byte) bool {
			if len(k) == 1 {
				got[string(k)] = string(v)
			}
			return true
		})
	})
	want := map[string]string{"a": "va", "b": "vb", "d": "vd", "g": "vg", "h": "vh"}
	if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after commit: %v, %v; want %v", got, err, want)
	}

	s := metatest.NewStore(t, e)
	d, err := s.Create(ctx, meta.RootIno, "d", meta.TypeDir, 0o755, 0, 0, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	before = e.Stats()
	f, err := s.Create(ctx, d.Ino, "f", meta.TypeFile, 0o644, 0, 0, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	// BEGIN with the reads, one INSERT of the inode, the entry, the
	// parent and the counter, COMMIT.
	if st := e.Stats().Statements - before.Statements; st != 4 {
		t.Errorf("a create took %d statements, want 4", st)
	}
	if a, err := s.Lookup(ctx, d.Ino, "f"); err != nil || a.Ino != f.Ino {
		t.Fatalf("lookup f: %+v, %v; created %d", a, err, f.Ino)
	}
}
