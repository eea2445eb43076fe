package meta_test

import (
	"path/filepath"
	"testing"

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
