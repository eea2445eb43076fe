package postgres_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"poolfs/internal/meta"
	"poolfs/internal/meta/pgtest"
	"poolfs/internal/meta/postgres"
)

// TestOwnerBinding: the first cluster to open a database owns it; it
// opens it again, another cluster is refused with both named, and of two
// clusters opening a new database at the same moment exactly one wins.
func TestOwnerBinding(t *testing.T) {
	ctx := context.Background()
	a := postgres.Owner{ID: "aaaa", Where: "host:/a"}
	b := postgres.Owner{ID: "bbbb", Where: "host:/b"}
	url := pgtest.Start(t)

	e, err := postgres.Open(ctx, url, a)
	if err != nil {
		t.Fatal(err)
	}
	if bound, adopted := e.Bound(); !bound || adopted {
		t.Fatalf("first open: bound %v adopted %v, want a new binding", bound, adopted)
	}
	if err := e.Update(ctx, func(tx meta.Tx) error { return tx.Put([]byte("k"), []byte("a")) }); err != nil {
		t.Fatal(err)
	}
	e.Close()

	e, err = postgres.Open(ctx, url, a)
	if err != nil {
		t.Fatalf("reopen by the owner: %v", err)
	}
	if bound, _ := e.Bound(); bound || e.Owner().ID != a.ID || e.Owner().Where != a.Where || e.Owner().Since.IsZero() {
		t.Fatalf("reopen: bound %v owner %+v", bound, e.Owner())
	}
	e.Close()

	_, err = postgres.Open(ctx, url, b)
	var oe *postgres.OwnerError
	if !errors.Is(err, postgres.ErrOtherCluster) || !errors.As(err, &oe) {
		t.Fatalf("open by another cluster: %v, want ErrOtherCluster", err)
	}
	if oe.Owner.ID != a.ID || oe.Owner.Where != a.Where || oe.Opener.ID != b.ID {
		t.Fatalf("refusal names %+v / %+v", oe.Owner, oe.Opener)
	}

	// A race on a new database: one binds, the other is refused.
	url = pgtest.Start(t)
	var (
		wg   sync.WaitGroup
		errs [2]error
	)
	for i, o := range []postgres.Owner{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e, err := postgres.Open(ctx, url, o)
			if err == nil {
				e.Close()
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	if (errs[0] == nil) == (errs[1] == nil) || !errors.Is(errors.Join(errs[:]...), postgres.ErrOtherCluster) {
		t.Fatalf("two clusters opening a new database at once: %v / %v, want one refused", errs[0], errs[1])
	}
}

// TestOwnerAdoptsOlderDatabase: a database used before bindings (a kv
// table with data, no binding) is bound to the first cluster that opens
// it, which is told so; its data stays.
func TestOwnerAdoptsOlderDatabase(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Start(t)
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{
		`CREATE TABLE kv (k bytea PRIMARY KEY, v bytea NOT NULL)`,
		`INSERT INTO kv VALUES ('\x6b'::bytea, '\x76'::bytea)`,
	} {
		if _, err := c.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	c.Close(ctx)
	e, err := postgres.Open(ctx, url, testOwner)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if bound, adopted := e.Bound(); !bound || !adopted {
		t.Fatalf("bound %v adopted %v, want an adopted database", bound, adopted)
	}
	err = e.View(ctx, func(tx meta.Tx) error {
		v, err := tx.Get([]byte("k"))
		if err == nil && string(v) != "v" {
			t.Errorf("value %q", v)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := postgres.Open(ctx, url, postgres.Owner{ID: "other"}); !errors.Is(err, postgres.ErrOtherCluster) {
		t.Fatalf("second cluster on the adopted database: %v", err)
	}
}
