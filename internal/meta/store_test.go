package meta_test

import (
	"context"
	"path/filepath"
	"testing"

	"poolfs/internal/meta"
	"poolfs/internal/meta/metatest"
	"poolfs/internal/meta/sqlite"
)

// sqliteEngine opens a fresh SQLite engine in a temporary directory,
// closed when the test ends.
func sqliteEngine(t *testing.T) *sqlite.Engine {
	t.Helper()
	e, err := sqlite.Open(filepath.Join(t.TempDir(), "meta.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// oneFile returns a store over a fresh SQLite engine (and the engine)
// holding one empty file "f" in the root.
func oneFile(t *testing.T) (*sqlite.Engine, *meta.Store, meta.Attr) {
	t.Helper()
	e := sqliteEngine(t)
	s := metatest.NewStore(t, e)
	f, err := s.Create(context.Background(), meta.RootIno, "f", meta.TypeFile, 0o644, 0, 0, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	return e, s, f
}

// sixDriveRec is the record of stripe, l bytes long, generation 1, on
// drives 1 to 6.
func sixDriveRec(stripe uint64, l uint32) meta.StripeRec {
	return meta.StripeRec{Stripe: stripe, Gen: 1, Len: l, ShardSize: 1 << 18, Drives: []uint32{1, 2, 3, 4, 5, 6}}
}
