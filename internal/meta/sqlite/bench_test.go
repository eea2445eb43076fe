package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"poolfs/internal/meta"
	"poolfs/internal/meta/metatest"
	"poolfs/internal/meta/sqlite"
)

// Benchmarks of the SQLite engine and of Store operations on it. They run
// with 32 goroutines per CPU, like a FUSE client with many requests in
// flight; every Update is durable (fsync per group-committed batch).

const parallelism = 32

func benchEngine(b *testing.B) *sqlite.Engine {
	e, err := sqlite.Open(filepath.Join(b.TempDir(), "meta.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		st := e.Stats()
		b.ReportMetric(float64(st.Updates)/float64(max(st.Batches, 1)), "updates/batch")
		e.Close()
	})
	return e
}

func BenchmarkUpdateParallel(b *testing.B) {
	e := benchEngine(b)
	var n atomic.Uint64
	b.SetParallelism(parallelism)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			k := fmt.Appendf(nil, "k%016d", n.Add(1))
			err := e.Update(context.Background(), func(tx meta.Tx) error {
				if _, err := tx.Get(k); err != nil && err != meta.ErrNoKey {
					return err
				}
				return tx.Put(k, k)
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tx/s")
}

func benchStore(b *testing.B) (*meta.Store, meta.Attr) {
	s := metatest.NewStore(b, benchEngine(b))
	d, err := s.Create(context.Background(), meta.RootIno, "bench", meta.TypeDir, 0755, 0, 0, 0, "")
	if err != nil {
		b.Fatal(err)
	}
	return s, d
}

// createN creates files f0..f(n-1) in dir with many goroutines.
func createN(b *testing.B, s *meta.Store, dir meta.Ino, n int) {
	var wg sync.WaitGroup
	var next atomic.Int64
	for range parallelism {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				if _, err := s.Create(context.Background(), dir, fmt.Sprintf("f%d", i), meta.TypeFile, 0644, 0, 0, 0, ""); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func BenchmarkCreate(b *testing.B) {
	s, d := benchStore(b)
	var next atomic.Int64
	b.SetParallelism(parallelism)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := next.Add(1)
			if _, err := s.Create(context.Background(), d.Ino, fmt.Sprintf("f%d", i), meta.TypeFile, 0644, 0, 0, 0, ""); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "creates/s")
}

func BenchmarkLookup(b *testing.B) {
	s, d := benchStore(b)
	const files = 1000
	b.SetParallelism(parallelism)
	createN(b, s, d.Ino, files)
	var n atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1) % files
			if _, err := s.Lookup(context.Background(), d.Ino, fmt.Sprintf("f%d", i)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lookups/s")
}

func BenchmarkGetattr(b *testing.B) {
	s, d := benchStore(b)
	b.SetParallelism(parallelism)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.Getattr(context.Background(), d.Ino); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "stats/s")
}

func BenchmarkUnlink(b *testing.B) {
	s, d := benchStore(b)
	b.SetParallelism(parallelism)
	createN(b, s, d.Ino, b.N)
	var n atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1) - 1
			if err := s.Unlink(context.Background(), d.Ino, fmt.Sprintf("f%d", i)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "removes/s")
}
