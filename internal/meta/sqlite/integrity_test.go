package sqlite_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"poolfs/internal/meta"
	"poolfs/internal/meta/sqlite"
	"poolfs/internal/meta/sqlite/sqlitetest"
)

// fill writes n keys "s"+i (8 bytes big-endian) with 100-byte values.
func fill(t *testing.T, e meta.Engine, from, n int) {
	t.Helper()
	ctx := context.Background()
	err := e.Update(ctx, func(tx meta.Tx) error {
		for i := from; i < from+n; i++ {
			if err := tx.Put(key(i), bytes.Repeat([]byte{byte(i)}, 100)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func key(i int) []byte { return binary.BigEndian.AppendUint64([]byte{'s'}, uint64(i)) }

// TestOpenRefusesCorruptStore: a store with damaged B-tree pages is
// refused at Open with meta.ErrStoreCorrupt, and the check of a running
// engine finds it too.
func TestOpenRefusesCorruptStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "meta.db")
	e, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	fill(t, e, 0, 2000)
	if err := e.CheckIntegrity(context.Background(), true); err != nil {
		t.Fatalf("sound store: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	pages, err := sqlitetest.CorruptLeafPages(path, key(1000))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("damaged pages %v", pages)
	_, err = sqlite.Open(path)
	t.Logf("Open: %v", err)
	if !errors.Is(err, meta.ErrStoreCorrupt) {
		t.Fatalf("Open of a corrupt store: %v, want ErrStoreCorrupt", err)
	}
	if err := sqlite.Verify(context.Background(), path); !errors.Is(err, meta.ErrStoreCorrupt) {
		t.Fatalf("Verify of a corrupt store: %v, want ErrStoreCorrupt", err)
	}
}

// TestBackupRestoreWhileWriting: a backup taken while writers commit is a
// consistent store (every batch all or nothing), owner-only, and Restore
// puts it in place of another database, keeping the old one aside.
func TestBackupRestoreWhileWriting(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "meta.db")
	e, err := sqlite.OpenWith(path, sqlite.Options{Deferred: true, Linger: 5e6})
	if err != nil {
		t.Fatal(err)
	}
	fill(t, e, 0, 1000)
	ctx := context.Background()
	var stop atomic.Bool
	var wg sync.WaitGroup
	started := make(chan struct{})
	wg.Add(1)
	go func() { // batches of 100 keys, each one transaction
		defer wg.Done()
		for b := 10; !stop.Load(); b++ {
			fill(t, e, b*100, 100)
			if b == 20 {
				close(started)
			}
		}
	}()
	<-started
	s := meta.New(e, meta.Options{})
	bak := filepath.Join(dir, "backup.db")
	err = s.Backup(ctx, bak)
	stop.Store(true)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(bak)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("backup mode %v, want 0600", st.Mode().Perm())
	}
	if err := s.Backup(ctx, bak); err == nil {
		t.Error("backup over an existing file succeeded")
	}

	other := filepath.Join(t.TempDir(), "meta.db")
	o, err := sqlite.Open(other)
	if err != nil {
		t.Fatal(err)
	}
	fill(t, o, 0, 10)
	if _, err := sqlite.Restore(ctx, bak, other); err == nil {
		t.Fatal("restore over a database in use succeeded")
	}
	o.Close()
	old, err := sqlite.Restore(ctx, bak, other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(old); err != nil {
		t.Errorf("replaced database not kept: %v", err)
	}
	r, err := sqlite.Open(other)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	n := 0
	err = r.View(ctx, func(tx meta.Tx) error {
		n = 0
		return tx.Scan(nil, nil, 0, func(k, v []byte) bool {
			i := int(binary.BigEndian.Uint64(k[1:]))
			if !bytes.Equal(v, bytes.Repeat([]byte{byte(i)}, 100)) {
				t.Errorf("key %d: wrong value", i)
			}
			if i != n {
				t.Errorf("key %d after %d keys: a batch is torn", i, n)
			}
			n++
			return true
		})
	})
	if err != nil || n < 1000 || n%100 != 0 {
		t.Fatalf("restored store: %d keys (%v), want whole batches of at least 1000", n, err)
	}
	t.Logf("backup held %d keys", n)
}

// TestRestoreRefusesCorruptBackup: a damaged backup is not put in place.
func TestRestoreRefusesCorruptBackup(t *testing.T) {
	dir := t.TempDir()
	bak := filepath.Join(dir, "bak.db")
	e, err := sqlite.Open(bak)
	if err != nil {
		t.Fatal(err)
	}
	fill(t, e, 0, 2000)
	e.Close()
	if _, err := sqlitetest.CorruptLeafPages(bak, key(500)); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, "meta.db")
	if _, err := sqlite.Restore(context.Background(), bak, dst); !errors.Is(err, meta.ErrStoreCorrupt) {
		t.Fatalf("restore of a corrupt backup: %v", err)
	}
	if _, err := os.Stat(dst); err == nil {
		t.Fatal("restore of a corrupt backup created the database")
	}
}

// TestSalvage: a store with a damaged leaf page is rebuilt from every row
// that still reads: the rows of the damaged page are lost (one skipped
// range), every other row is copied with its value, the result passes the
// integrity check and opens, and the damaged file is kept.
func TestSalvage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "meta.db")
	e, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	const n = 5000
	fill(t, e, 0, n)
	e.Close()
	if _, err := sqlitetest.CorruptLeafPages(path, key(2500)); err != nil {
		t.Fatal(err)
	}
	rep, err := sqlite.Salvage(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("salvaged %d of %d rows, skipped %d ranges", rep.Rows, n, len(rep.Skipped))
	if len(rep.Skipped) != 1 || rep.Rows >= n || rep.Rows < n-200 {
		t.Fatalf("salvage: %d rows, skipped %v", rep.Rows, rep.Skipped)
	}
	if _, err := os.Stat(rep.Old); err != nil {
		t.Fatalf("damaged database not kept: %v", err)
	}
	r, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got := map[int]bool{}
	err = r.View(context.Background(), func(tx meta.Tx) error {
		return tx.Scan(nil, nil, 0, func(k, v []byte) bool {
			i := int(binary.BigEndian.Uint64(k[1:]))
			if !bytes.Equal(v, bytes.Repeat([]byte{byte(i)}, 100)) {
				t.Errorf("key %d: wrong value", i)
			}
			got[i] = true
			return true
		})
	})
	if err != nil || len(got) != rep.Rows {
		t.Fatalf("salvaged store: %d rows, %v", len(got), err)
	}
	sk := rep.Skipped[0]
	for i := 0; i < n; i++ {
		if !got[i] && (bytes.Compare(key(i), sk.From) <= 0 || bytes.Compare(key(i), sk.To) >= 0) {
			t.Fatalf("row %d lost outside the skipped range %x..%x", i, sk.From, sk.To)
		}
	}
	if got[2500] {
		t.Fatal("a row of the damaged page was read back")
	}
}
