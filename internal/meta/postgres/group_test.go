package postgres_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"poolfs/internal/meta"
	"poolfs/internal/meta/metatest"
	"poolfs/internal/meta/postgres"
)

// TestGroupCommit: Updates that wait while another runs commit together
// in one transaction; one whose function fails loses its own writes only,
// and each sees its predecessors' writes (of two that take one name, one
// wins, and the other's writes are dropped).
func TestGroupCommit(t *testing.T) {
	e := openPG(t)
	ctx := context.Background()
	release, first := holdUpdate(e, "k00", "first")
	errBoom := errors.New("boom")
	errTaken := errors.New("name taken")
	const n = 15
	errs := make([]error, n+1)
	var wg sync.WaitGroup
	for i := 1; i <= n; i++ {
		wg.Go(func() {
			errs[i] = e.Update(ctx, func(tx meta.Tx) error {
				if err := tx.Put(fmt.Appendf(nil, "k%02d", i), []byte("v")); err != nil {
					return err
				}
				switch i {
				case 7:
					return errBoom
				case 8, 9:
					if _, err := tx.Get([]byte("name")); err == nil {
						return errTaken
					} else if !errors.Is(err, meta.ErrNoKey) {
						return err
					}
					return tx.Put([]byte("name"), fmt.Appendf(nil, "%d", i))
				}
				return nil
			})
		})
	}
	for deadline := time.Now().Add(10 * time.Second); e.Queued() < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d updates queued behind a running one", e.Queued(), n)
		}
	}
	release()
	wg.Wait()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	taken, loser := 0, 0
	for i := 1; i <= n; i++ {
		switch {
		case i == 7:
			if !errors.Is(errs[i], errBoom) {
				t.Errorf("update %d: %v, want its own error", i, errs[i])
			}
		case (i == 8 || i == 9) && errors.Is(errs[i], errTaken):
			taken, loser = taken+1, i
		case errs[i] != nil:
			t.Errorf("update %d: %v", i, errs[i])
		}
	}
	if taken != 1 {
		t.Errorf("%d of two updates found the name taken, want 1", taken)
	}
	if st := e.Stats(); st.Groups == 0 {
		t.Errorf("stats %+v: no group transaction", st)
	}
	got := map[string]string{}
	err := e.View(ctx, func(tx meta.Tx) error {
		return tx.Scan(nil, nil, 0, func(k, v []byte) bool {
			if bytes.HasPrefix(k, []byte("k")) || string(k) == "name" {
				got[string(k)] = string(v)
			}
			return true
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i <= n; i++ {
		k := fmt.Sprintf("k%02d", i)
		if _, ok := got[k]; ok == (i == 7 || i == loser) {
			t.Errorf("key %s present: %v", k, ok)
		}
	}
	if got["k00"] != "first" || got["name"] != fmt.Sprint(17-loser) {
		t.Errorf("k00 %q, name %q", got["k00"], got["name"])
	}
}

// TestCreatorsDoNotConflict: creators in their own directories through
// one engine never abort each other (SERIALIZABLE transactions run side
// by side did, on PostgreSQL's predicate locks of shared index pages).
func TestCreatorsDoNotConflict(t *testing.T) {
	e := openPG(t)
	s := metatest.NewStore(t, e)
	ctx := context.Background()
	const creators, files = 16, 15
	var wg sync.WaitGroup
	errs := make(chan error, creators)
	for c := range creators {
		wg.Go(func() {
			d, err := s.Create(ctx, meta.RootIno, fmt.Sprintf("d%d", c), meta.TypeDir, 0o755, 0, 0, 0, "")
			if err != nil {
				errs <- err
				return
			}
			for i := range files {
				if _, _, err := s.CreateAttr(ctx, meta.CreateArgs{Parent: d.Ino, Name: fmt.Sprintf("f%d", i), Type: meta.TypeFile, Mode: 0o644, Open: true}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if st := e.Stats(); st.Retries != 0 {
		t.Errorf("stats %+v: creators in different directories conflicted", st)
	}
	for c := range creators {
		d, err := s.Lookup(ctx, meta.RootIno, fmt.Sprintf("d%d", c))
		if err != nil {
			t.Fatal(err)
		}
		ents, err := s.Readdir(ctx, d.Ino, "", 0)
		if err != nil || len(ents) != files {
			t.Fatalf("d%d: %d entries, %v; want %d", c, len(ents), err, files)
		}
	}
}

// TestQueuedUpdateCancelled: an Update waiting for its turn returns when
// its context ends, and its function does not run later.
func TestQueuedUpdateCancelled(t *testing.T) {
	e := openPG(t)
	release, first := holdUpdate(e, "first", "1")
	ctx, cancel := context.WithCancel(context.Background())
	queued := make(chan error, 1)
	go func() {
		queued <- e.Update(ctx, func(tx meta.Tx) error { return tx.Put([]byte("late"), []byte("1")) })
	}()
	for deadline := time.Now().Add(10 * time.Second); e.Queued() < 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the second update did not queue behind the first")
		}
	}
	cancel()
	if err := <-queued; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled queued update: %v, want context.Canceled", err)
	}
	release()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	// Another update runs after the cancelled one's turn.
	if err := e.Update(context.Background(), func(tx meta.Tx) error { return tx.Put([]byte("next"), []byte("1")) }); err != nil {
		t.Fatal(err)
	}
	err := e.View(context.Background(), func(tx meta.Tx) error {
		if _, err := tx.Get([]byte("late")); !errors.Is(err, meta.ErrNoKey) {
			return fmt.Errorf("get late: %v, want ErrNoKey", err)
		}
		_, err := tx.Get([]byte("first"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestGroupReadsWithBegin: a group of creates reads the keys of all its
// creates in one round trip sent with BEGIN and writes with COMMIT in a
// second, however many creates it holds (not one read per create).
func TestGroupReadsWithBegin(t *testing.T) {
	e := openPG(t)
	s := metatest.NewStore(t, e)
	ctx := context.Background()
	const n = 15
	dirs := makeDirs(t, s, n)
	release, first := holdUpdate(e, "first", "1")
	inos := make([]meta.Ino, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			a, err := s.Create(ctx, dirs[i], "f", meta.TypeFile, 0o644, 0, 0, 0, "")
			inos[i], errs[i] = a.Ino, err
		})
	}
	for deadline := time.Now().Add(10 * time.Second); e.Queued() < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d creates queued behind a running update", e.Queued(), n)
		}
	}
	before := e.Stats()
	release()
	wg.Wait()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	st := e.Stats()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("create in d%d: %v", i, err)
		}
	}
	if g := st.Groups - before.Groups; g != 1 || st.Retries != before.Retries {
		t.Fatalf("%d groups, %d retries; want the creates in one group", g, st.Retries-before.Retries)
	}
	// One for the running update (its write with BEGIN and COMMIT), two
	// for the group.
	if rt := st.RoundTrips - before.RoundTrips; rt != 3 {
		t.Errorf("a group of %d creates took %d round trips (with the update before it), want 3", n, rt)
	}
	for i, d := range dirs {
		if a, err := s.Lookup(ctx, d, "f"); err != nil || a.Ino != inos[i] || a.Type != meta.TypeFile {
			t.Errorf("d%d/f: %+v, %v; created %d", i, a, err, inos[i])
		}
	}
	// The group's reads saw each create's directory as it was: a second
	// create of a name is refused, in a group as alone.
	if _, err := s.Create(ctx, dirs[0], "f", meta.TypeFile, 0o644, 0, 0, 0, ""); !errors.Is(err, meta.ErrExist) {
		t.Fatalf("create of an existing name: %v, want ErrExist", err)
	}
}

// holdUpdate starts an Update of e that puts key = val and holds it,
// running, until release is called: Updates made meanwhile queue behind
// it. first gives its error.
func holdUpdate(e *postgres.Engine, key, val string) (release func(), first <-chan error) {
	hold, running := make(chan struct{}), make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() {
		done <- e.Update(context.Background(), func(tx meta.Tx) error {
			running <- struct{}{}
			<-hold
			return tx.Put([]byte(key), []byte(val))
		})
	}()
	<-running
	return func() { close(hold) }, done
}
