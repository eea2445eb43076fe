package sqlite_test

import (
	"path/filepath"
	"testing"

	"poolfs/internal/meta"
	"poolfs/internal/meta/metatest"
	"poolfs/internal/meta/sqlite"
)

func open(t *testing.T) meta.Engine {
	e, err := sqlite.Open(filepath.Join(t.TempDir(), "meta.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Error(err)
		}
	})
	return e
}

func TestConformance(t *testing.T) { metatest.Run(t, open) }
