package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"poolfs/internal/meta"
	"poolfs/internal/meta/sqlite"
)

// BenchmarkIntegrityCheck measures the integrity check of a store of 100k
// one-stripe 8+2 files in 100 directories (about what `poolfs up` checks
// at open, and the collector before an orphan scan).
func BenchmarkIntegrityCheck(b *testing.B) {
	const files = 100_000
	path := filepath.Join(b.TempDir(), "meta.db")
	e, err := sqlite.OpenWith(path, sqlite.Options{Deferred: true, Linger: 5e6})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	s := meta.New(e, meta.Options{})
	lay := meta.Layout{K: 8, M: 2, Unit: 1 << 20}
	if err := s.Init(ctx, lay); err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 100)
	for d := 0; d < 100; d++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dir, err := s.Create(ctx, meta.RootIno, fmt.Sprint("d", d), meta.TypeDir, 0o755, 0, 0, 0, "")
			for i := 0; err == nil && i < files/100; i++ {
				var f meta.Attr
				f, err = s.Create(ctx, dir.Ino, fmt.Sprint("f", i), meta.TypeFile, 0o644, 0, 0, 0, "")
				if err != nil {
					break
				}
				rec := meta.StripeRec{Gen: 1, PG: uint32(i % 512), Len: 1 << 20, ShardSize: 1 << 17,
					Drives: []uint32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, K: 8}
				_, err = s.CommitStripes(ctx, f.Ino, []meta.StripeCommit{{Rec: rec}}, 1<<20, 0)
			}
			errs[d] = err
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	if err := e.Close(); err != nil {
		b.Fatal(err)
	}
	for _, full := range []bool{false, true} {
		name := "quick_check"
		if full {
			name = "integrity_check"
		}
		b.Run(name, func(b *testing.B) {
			e, err := sqlite.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			for b.Loop() {
				if err := e.CheckIntegrity(ctx, full); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("backup", func(b *testing.B) {
		e, err := sqlite.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		defer e.Close()
		st, _ := os.Stat(path)
		b.SetBytes(st.Size())
		i := 0
		for b.Loop() {
			dst := filepath.Join(b.TempDir(), fmt.Sprint("b", i))
			if err := meta.New(e, meta.Options{}).Backup(ctx, dst); err != nil {
				b.Fatal(err)
			}
			os.Remove(dst)
			i++
		}
	})
	b.Run("open", func(b *testing.B) { // includes the integrity check
		for b.Loop() {
			e, err := sqlite.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			e.Close()
		}
	})
}
