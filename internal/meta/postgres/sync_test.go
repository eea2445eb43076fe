package postgres_test

import (
	"context"
	"net/url"
	"testing"

	"poolfs/internal/meta"
	"poolfs/internal/meta/metatest"
	"poolfs/internal/meta/pgtest"
	"poolfs/internal/meta/postgres"
)

// TestDeferredSync runs a Store on a connection with asynchronous commits
// (synchronous_commit=off in the URL) and checks that commits are visible
// at once and that Sync succeeds.
func TestDeferredSync(t *testing.T) {
	ctx := context.Background()
	u, err := url.Parse(pgtest.Start(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("synchronous_commit", "off")
	u.RawQuery = q.Encode()
	e, err := postgres.Open(ctx, u.String(), testOwner)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	var _ meta.Syncer = e
	s := metatest.NewStore(t, e)
	a, err := s.Create(ctx, meta.RootIno, "f", meta.TypeFile, 0644, 0, 0, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := s.Lookup(ctx, meta.RootIno, "f")
	if err != nil || got.Ino != a.Ino {
		t.Fatalf("lookup after sync: %+v, %v", got, err)
	}
}
