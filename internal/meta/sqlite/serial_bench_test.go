package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"poolfs/internal/meta"
	"poolfs/internal/meta/metatest"
	"poolfs/internal/meta/sqlite"
)

// BenchmarkSerial measures one caller's latency per Store operation on a
// deferred-durability engine (what one process on a mount sees).
func BenchmarkSerial(b *testing.B) {
	for _, o := range []struct {
		name string
		o    sqlite.Options
	}{
		{"deferred", sqlite.Options{Deferred: true}},
		{"linger", sqlite.Options{Deferred: true, Linger: 10 * time.Millisecond}}, // as poolfs up
	} {
		b.Run(o.name, func(b *testing.B) { benchSerial(b, o.o) })
	}
}

func benchSerial(b *testing.B, o sqlite.Options) {
	ctx := context.Background()
	e, err := sqlite.OpenWith(filepath.Join(b.TempDir(), "meta.db"), o)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { e.Close() })
	s := metatest.NewStore(b, e)
	d, err := s.Create(ctx, meta.RootIno, "bench", meta.TypeDir, 0755, 0, 0, 0, "")
	if err != nil {
		b.Fatal(err)
	}
	name := func(i int) string { return fmt.Sprintf("f%d", i) }
	made := 0
	b.Run("CreateAttr", func(b *testing.B) {
		for range b.N {
			i := made
			made++
			if _, _, err := s.CreateAttr(ctx, meta.CreateArgs{Parent: d.Ino, Name: name(i), Type: meta.TypeFile, Mode: 0644}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Lookup", func(b *testing.B) {
		for i := range b.N {
			if _, err := s.Lookup(ctx, d.Ino, name(i%made)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Getattr", func(b *testing.B) {
		for range b.N {
			if _, err := s.Getattr(ctx, d.Ino); err != nil {
				b.Fatal(err)
			}
		}
	})
	gone := 0
	b.Run("UnlinkAttr", func(b *testing.B) {
		for range b.N {
			i := gone
			gone++
			if _, err := s.UnlinkAttr(ctx, d.Ino, name(i)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
