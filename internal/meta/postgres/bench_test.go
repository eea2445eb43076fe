package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"poolfs/internal/meta"
	"poolfs/internal/meta/metatest"
	"poolfs/internal/meta/pgtest"
	"poolfs/internal/meta/postgres"
)

// Benchmarks of Store operations on a local PostgreSQL server (started
// by pgtest, fsync on), one at a time, as one process on a mount sends
// them: their cost is mostly round trips to the server.
//
//	go test -run '^$' -bench . ./internal/meta/postgres/

func benchStore(b *testing.B) (*meta.Store, meta.Attr) {
	s, d, _ := benchEngine(b)
	return s, d
}

func benchEngine(b *testing.B) (*meta.Store, meta.Attr, *postgres.Engine) {
	e, err := postgres.Open(context.Background(), pgtest.Start(b), testOwner)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { e.Close() })
	s := metatest.NewStore(b, e)
	d, err := s.Create(context.Background(), meta.RootIno, "bench", meta.TypeDir, 0o755, 0, 0, 0, "")
	if err != nil {
		b.Fatal(err)
	}
	return s, d, e
}

// BenchmarkCreate creates files one after another, each opened by the
// create (a mount's O_CREAT).
func BenchmarkCreate(b *testing.B) {
	s, d, e := benchEngine(b)
	ctx := context.Background()
	i := 0
	for b.Loop() {
		i++
		if _, _, err := s.CreateAttr(ctx, meta.CreateArgs{Parent: d.Ino, Name: fmt.Sprintf("f%d", i), Type: meta.TypeFile, Mode: 0o644, Open: true}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "creates/s")
	st := e.Stats()
	b.ReportMetric(float64(st.RoundTrips)/float64(b.N), "roundtrips/create")
}

// BenchmarkCreateParallel runs 16 creators at once, each in its own
// directory, as the mounts of many clients do through one metadata
// server; it reports creates/s and, per create, round trips to the
// server and attempts retried after a serialization conflict.
func BenchmarkCreateParallel(b *testing.B) {
	const creators = 16
	s, _, e := benchEngine(b)
	dirs := makeDirs(b, s, creators)
	st := createInDirs(b, dirs, func(int) *meta.Store { return s }, e.Stats)
	b.ReportMetric(float64(st.Groups)/float64(b.N), "groups/create")
}

// BenchmarkCreateParallel4 is four creators through one metadata server,
// as the four tasks of one client host: few calls wait for each group.
func BenchmarkCreateParallel4(b *testing.B) {
	s, _, e := benchEngine(b)
	st := createInDirs(b, makeDirs(b, s, 4), func(int) *meta.Store { return s }, e.Stats)
	b.ReportMetric(float64(st.Groups)/float64(b.N), "groups/create")
}

// BenchmarkCreateUnlink creates a file and removes it again.
func BenchmarkCreateUnlink(b *testing.B) {
	s, d := benchStore(b)
	ctx := context.Background()
	for b.Loop() {
		if _, err := s.Create(ctx, d.Ino, "f", meta.TypeFile, 0o644, 0, 0, 0, ""); err != nil {
			b.Fatal(err)
		}
		if err := s.Unlink(ctx, d.Ino, "f"); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
}

// BenchmarkCreateServers runs 16 creators, each in its own directory,
// through 4 engines on one PostgreSQL server, as the metadata servers of
// a cluster do: their group transactions may conflict with each other.
// It reports creates/s and, per create, round trips and retried attempts
// (of all engines).
func BenchmarkCreateServers(b *testing.B) {
	const servers, creators = 4, 16
	url := pgtest.Start(b)
	ctx := context.Background()
	stores := make([]*meta.Store, servers)
	engines := make([]*postgres.Engine, servers)
	for i := range servers {
		e, err := postgres.Open(ctx, url, testOwner)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { e.Close() })
		engines[i], stores[i] = e, metatest.NewStore(b, e)
	}
	dirs := makeDirs(b, stores[0], creators)
	createInDirs(b, dirs, func(c int) *meta.Store { return stores[c%servers] }, func() (st postgres.Stats) {
		for _, e := range engines {
			s := e.Stats()
			st.RoundTrips += s.RoundTrips
			st.Retries += s.Retries
			st.OneTrip += s.OneTrip
			st.Stale += s.Stale
		}
		return st
	})
}

// makeDirs makes n directories d0, d1, ... under the root.
func makeDirs(tb testing.TB, s *meta.Store, n int) []meta.Ino {
	tb.Helper()
	dirs := make([]meta.Ino, n)
	for i := range dirs {
		d, err := s.Create(context.Background(), meta.RootIno, fmt.Sprintf("d%d", i), meta.TypeDir, 0o755, 0, 0, 0, "")
		if err != nil {
			tb.Fatal(err)
		}
		dirs[i] = d.Ino
	}
	return dirs
}

// createInDirs times b.N file creates shared among one creator per
// directory (creator c through store(c)), reports creates/s and, from
// stats before and after, round trips and retried attempts per create,
// and returns the stats' change.
func createInDirs(b *testing.B, dirs []meta.Ino, store func(c int) *meta.Store, stats func() postgres.Stats) postgres.Stats {
	ctx := context.Background()
	var next atomic.Int64
	before := stats()
	b.ResetTimer()
	var wg sync.WaitGroup
	for c, d := range dirs {
		s := store(c)
		wg.Go(func() {
			for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
				if _, _, err := s.CreateAttr(ctx, meta.CreateArgs{Parent: d, Name: fmt.Sprintf("f%d", i), Type: meta.TypeFile, Mode: 0o644, Open: true}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	after := stats()
	d := postgres.Stats{RoundTrips: after.RoundTrips - before.RoundTrips, Retries: after.Retries - before.Retries, Groups: after.Groups - before.Groups,
		OneTrip: after.OneTrip - before.OneTrip, Stale: after.Stale - before.Stale}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "creates/s")
	b.ReportMetric(float64(d.RoundTrips)/float64(b.N), "roundtrips/create")
	b.ReportMetric(float64(d.Retries)/float64(b.N), "retries/create")
	b.ReportMetric(float64(d.Stale)/float64(b.N), "stale/create")
	return d
}
