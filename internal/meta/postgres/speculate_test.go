package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"poolfs/internal/meta"
	"poolfs/internal/meta/metatest"
	"poolfs/internal/meta/pgtest"
	"poolfs/internal/meta/postgres"
)

// TestCreateOneRoundTrip: once a directory's inode has been read, each
// create in it is one round trip (BEGIN, the check of the values read
// from memory, the writes and COMMIT in one batch), not two; the files
// are there as created, a second create of a name is refused, and
// removes, whose reads are not all known, run as before without a failed
// check.
func TestCreateOneRoundTrip(t *testing.T) {
	e, s, d := pgDir(t)
	ctx := context.Background()
	create := func(name string) (meta.Attr, error) {
		a, _, err := s.CreateAttr(ctx, meta.CreateArgs{Parent: d.Ino, Name: name, Type: meta.TypeFile, Mode: 0o640, Uid: 7, Gid: 8, Open: true})
		return a, err
	}
	if _, err := create("warm"); err != nil { // reads d's inode from the server
		t.Fatal(err)
	}
	const n = 20
	inos := make([]meta.Ino, n)
	before := e.Stats()
	for i := range n {
		a, err := create(fmt.Sprintf("f%d", i))
		if err != nil {
			t.Fatal(err)
		}
		inos[i] = a.Ino
	}
	st := e.Stats()
	if rt := st.RoundTrips - before.RoundTrips; rt != n {
		t.Errorf("%d creates took %d round trips, want %d", n, rt, n)
	}
	if got := st.OneTrip - before.OneTrip; got != n || st.Stale != 0 {
		t.Errorf("%d of %d creates in one round trip, %d failed checks; want all, none", got, n, st.Stale)
	}
	for i, ino := range inos {
		a, err := s.Lookup(ctx, d.Ino, fmt.Sprintf("f%d", i))
		if err != nil || a.Ino != ino || a.Nlink != 1 || a.Mode != 0o640 || a.Uid != 7 || a.Gid != 8 || a.Type != meta.TypeFile {
			t.Fatalf("lookup f%d: %+v, %v; created %d", i, a, err, ino)
		}
	}
	if _, err := create("f3"); !errors.Is(err, meta.ErrExist) {
		t.Fatalf("create of an existing name: %v, want ErrExist", err)
	}
	if a, err := s.Lookup(ctx, d.Ino, "f3"); err != nil || a.Ino != inos[3] {
		t.Fatalf("f3 after the refused create: %+v, %v; want inode %d", a, err, inos[3])
	}
	for i := range n {
		if err := s.Unlink(ctx, d.Ino, fmt.Sprintf("f%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if got := names(t, s, d.Ino); !slices.Equal(got, []string{"warm"}) {
		t.Fatalf("after the removes d holds %q, want [warm]", got)
	}
	if st := e.Stats(); st.Stale != 0 {
		t.Errorf("%d failed checks, want none (a remove's file inode is not known: it runs as before)", st.Stale)
	}
}

// TestChangedValuesFailTheCheck: two metadata servers (engines) on one
// database. What one remembers goes stale when the other writes: the
// check of the one-round-trip transaction then fails, nothing of it is
// written, and the create runs as before, on the server's values: it
// succeeds if the name is free, and is refused if the other server took
// the name meanwhile (guessed absent from memory).
func TestChangedValuesFailTheCheck(t *testing.T) {
	url := pgtest.Start(t)
	ctx := context.Background()
	open := func() (*postgres.Engine, *meta.Store) {
		e, err := postgres.Open(ctx, url, testOwner)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		return e, metatest.NewStore(t, e)
	}
	ea, a := open()
	_, b := open()
	d, err := a.Create(ctx, meta.RootIno, "d", meta.TypeDir, 0o755, 0, 0, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a0", "a1"} { // a knows d
		if _, err := a.Create(ctx, d.Ino, name, meta.TypeFile, 0o644, 0, 0, 0, ""); err != nil {
			t.Fatal(err)
		}
	}
	x, err := b.Create(ctx, d.Ino, "x", meta.TypeFile, 0o600, 0, 0, 0, "") // changes d, takes x
	if err != nil {
		t.Fatal(err)
	}
	before := ea.Stats()
	if _, err := a.Create(ctx, d.Ino, "x", meta.TypeFile, 0o644, 0, 0, 0, ""); !errors.Is(err, meta.ErrExist) {
		t.Fatalf("a's create of x, taken by b: %v, want ErrExist", err)
	}
	if st := ea.Stats(); st.Stale-before.Stale != 1 {
		t.Errorf("%d failed checks, want 1 (x guessed absent, d changed)", st.Stale-before.Stale)
	}
	// a forgot the values it found changed: its next create reads them
	// from the server (no check to fail).
	if _, err := a.Create(ctx, d.Ino, "a2", meta.TypeFile, 0o644, 0, 0, 0, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create(ctx, d.Ino, "y", meta.TypeFile, 0o644, 0, 0, 0, ""); err != nil {
		t.Fatal(err)
	}
	a3, err := a.Create(ctx, d.Ino, "a3", meta.TypeFile, 0o644, 0, 0, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	if st := ea.Stats(); st.Stale-before.Stale != 2 {
		t.Errorf("%d failed checks, want 2 (d changed by b's create of y)", st.Stale-before.Stale)
	}
	if got, err := b.Lookup(ctx, d.Ino, "x"); err != nil || got.Ino != x.Ino || got.Mode != 0o600 {
		t.Fatalf("x: %+v, %v; want b's inode %d, mode 600", got, err, x.Ino)
	}
	if got, err := b.Lookup(ctx, d.Ino, "a3"); err != nil || got.Ino != a3.Ino {
		t.Fatalf("a3: %+v, %v; want inode %d", got, err, a3.Ino)
	}
	if got := names(t, b, d.Ino); !slices.Equal(got, []string{"a0", "a1", "a2", "a3", "x", "y"}) {
		t.Fatalf("d holds %q", got)
	}
	// The next create is one round trip again: the create that ran
	// anew read d.
	before = ea.Stats()
	if _, err := a.Create(ctx, d.Ino, "a4", meta.TypeFile, 0o644, 0, 0, 0, ""); err != nil {
		t.Fatal(err)
	}
	if st := ea.Stats(); st.OneTrip-before.OneTrip != 1 || st.RoundTrips-before.RoundTrips != 1 {
		t.Errorf("create after a failed check: %d round trips, %d in one; want 1, 1", st.RoundTrips-before.RoundTrips, st.OneTrip-before.OneTrip)
	}
}

// names lists directory dir.
func names(t *testing.T, s *meta.Store, dir meta.Ino) []string {
	t.Helper()
	ents, err := s.Readdir(context.Background(), dir, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name)
	}
	slices.Sort(out)
	return out
}

// TestCheckCatchesEveryChange: engine a remembers what its committed
// transactions read; engine b (another metadata server) then changes the
// key: a's next transaction, run from memory, must fail its check and run
// on the server's value. Each case is a value changed, a key guessed
// absent that b wrote, and an empty value (present) that b deleted.
func TestCheckCatchesEveryChange(t *testing.T) {
	url := pgtest.Start(t)
	ctx := context.Background()
	open := func() *postgres.Engine {
		e, err := postgres.Open(ctx, url, testOwner)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		return e
	}
	a, b := open(), open()
	put := func(e *postgres.Engine, k, v string) {
		t.Helper()
		if err := e.Update(ctx, func(tx meta.Tx) error { return tx.Put([]byte(k), []byte(v)) }); err != nil {
			t.Fatal(err)
		}
	}
	// derive puts key+"'" = what key holds, or "none".
	derive := func(key string) error {
		return a.Update(ctx, func(tx meta.Tx) error {
			v, err := tx.Get([]byte(key))
			switch {
			case errors.Is(err, meta.ErrNoKey):
				v = []byte("none")
			case err != nil:
				return err
			}
			return tx.Put([]byte(key+"'"), append([]byte("saw "), v...))
		})
	}
	for _, c := range []struct {
		name, key string
		before    func() // sets what a remembers
		change    func() // b's change
		want      string
	}{
		{"changed", "c", func() { put(a, "c", "1") }, func() { put(b, "c", "2") }, "saw 2"},
		{"empty deleted", "e", func() { put(a, "e", "") }, func() {
			if err := b.Update(ctx, func(tx meta.Tx) error { return tx.Delete([]byte("e")) }); err != nil {
				t.Fatal(err)
			}
		}, "saw none"},
		{"absent written", "n", func() {}, func() { put(b, "n", "3") }, "saw 3"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.before()
			if c.key != "n" { // a reads the key in a committed transaction: it remembers it
				if err := derive(c.key); err != nil {
					t.Fatal(err)
				}
			}
			c.change()
			before := a.Stats()
			// "n" is unknown to a, guessed absent: derive would not write it,
			// so it reads from the server; a create-like function that
			// writes the key it guessed is sent from memory instead.
			fn := derive
			if c.key == "n" {
				fn = func(key string) error {
					return a.Update(ctx, func(tx meta.Tx) error {
						v, err := tx.Get([]byte(key))
						switch {
						case errors.Is(err, meta.ErrNoKey):
							return tx.Put([]byte(key), []byte("a's"))
						case err != nil:
							return err
						}
						return tx.Put([]byte(key+"'"), append([]byte("saw "), v...))
					})
				}
			}
			if err := fn(c.key); err != nil {
				t.Fatal(err)
			}
			if st := a.Stats(); st.Stale-before.Stale != 1 {
				t.Errorf("%d failed checks, want 1", st.Stale-before.Stale)
			}
			err := b.View(ctx, func(tx meta.Tx) error {
				v, err := tx.Get([]byte(c.key + "'"))
				if err == nil && string(v) != c.want {
					err = fmt.Errorf("%s' = %q, want %q", c.key, v, c.want)
				}
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestGroupOneRoundTrip: a group of creates whose directories are known
// commits in one round trip, however many creates it holds, each create
// with its own outcome (one finds its name taken: the group then runs as
// before, and still only that create fails).
func TestGroupOneRoundTrip(t *testing.T) {
	e := openPG(t)
	s := metatest.NewStore(t, e)
	ctx := context.Background()
	const n = 15
	dirs := makeDirs(t, s, n)
	for _, d := range dirs {
		if _, err := s.Create(ctx, d, "warm", meta.TypeFile, 0o644, 0, 0, 0, ""); err != nil { // reads d
			t.Fatal(err)
		}
	}
	group := func(name func(i int) string) ([]meta.Ino, []error, postgres.Stats) {
		t.Helper()
		release, first := holdUpdate(e, "first", "1")
		inos, errs := make([]meta.Ino, n), make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				a, err := s.Create(ctx, dirs[i], name(i), meta.TypeFile, 0o644, 0, 0, 0, "")
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
		return inos, errs, postgres.Stats{RoundTrips: st.RoundTrips - before.RoundTrips, OneTrip: st.OneTrip - before.OneTrip,
			Groups: st.Groups - before.Groups, Stale: st.Stale - before.Stale}
	}
	inos, errs, st := group(func(int) string { return "f" })
	for i, err := range errs {
		if err != nil {
			t.Fatalf("create in d%d: %v", i, err)
		}
	}
	// One for the held update, one for the group.
	if st.RoundTrips != 2 || st.OneTrip != 2 || st.Groups != 1 || st.Stale != 0 {
		t.Errorf("a group of %d creates: %+v; want 2 round trips (the update before it and the group), both one-round-trip, 1 group", n, st)
	}
	for i, d := range dirs {
		if a, err := s.Lookup(ctx, d, "f"); err != nil || a.Ino != inos[i] || a.Type != meta.TypeFile {
			t.Errorf("d%d/f: %+v, %v; created %d", i, a, err, inos[i])
		}
	}
	// d3's name is taken: its function fails, so the group runs as
	// before (reads with BEGIN, writes with COMMIT); the others succeed.
	_, errs, st = group(func(i int) string { return map[bool]string{true: "f", false: "g"}[i == 3] })
	for i, err := range errs {
		if i == 3 && !errors.Is(err, meta.ErrExist) || i != 3 && err != nil {
			t.Errorf("create in d%d: %v", i, err)
		}
	}
	if st.RoundTrips != 3 || st.Stale != 0 {
		t.Errorf("a group with a failing create: %+v; want 3 round trips, no failed check", st)
	}
}
