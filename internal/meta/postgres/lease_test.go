package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"poolfs/internal/meta"
	"poolfs/internal/meta/pgtest"
	"poolfs/internal/meta/postgres"
)

// TestLeaseTakeRenewExpire: a lease is held by one holder at a time; its
// holder renews it in the same term; another takes it only once it has
// expired (the database's clock), in a higher term; a release frees it at
// once. The leases that must still be valid at the next step are long
// and only the one that must expire is short (renewed just before the
// pause that outlasts it), so a loaded machine cannot expire a lease
// between two steps.
func TestLeaseTakeRenewExpire(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Start(t)
	a, b := openURL(t, url), openURL(t, url)
	const ttl, short = time.Minute, 300 * time.Millisecond

	st, err := a.AcquireLease(ctx, "mgmt", "A", "10.0.0.1:1", ttl)
	if err != nil || !st.Held || st.Term != 1 {
		t.Fatalf("A takes a free lease: %+v, %v", st, err)
	}
	st, err = b.AcquireLease(ctx, "mgmt", "B", "10.0.0.2:1", ttl)
	if err != nil || st.Held || st.Holder != "A" || st.Addr != "10.0.0.1:1" || !st.Valid {
		t.Fatalf("B asks while A holds it: %+v, %v; want A's, valid", st, err)
	}
	st, err = a.AcquireLease(ctx, "mgmt", "A", "10.0.0.1:1", short)
	if err != nil || !st.Held || st.Term != 1 {
		t.Fatalf("A renews: %+v, %v; want held in term 1", st, err)
	}
	time.Sleep(short + 200*time.Millisecond)
	st, err = b.AcquireLease(ctx, "mgmt", "B", "10.0.0.2:1", ttl)
	if err != nil || !st.Held || st.Term != 2 {
		t.Fatalf("B after A's lease expired: %+v, %v; want held in term 2", st, err)
	}
	st, err = a.AcquireLease(ctx, "mgmt", "A", "10.0.0.1:1", ttl)
	if err != nil || st.Held || st.Holder != "B" {
		t.Fatalf("A after B took it: %+v, %v; want B's", st, err)
	}
	if err := b.ReleaseLease(ctx, "mgmt", "B"); err != nil {
		t.Fatal(err)
	}
	st, err = a.AcquireLease(ctx, "mgmt", "A", "10.0.0.1:1", ttl)
	if err != nil || !st.Held || st.Term != 3 {
		t.Fatalf("A after B released it: %+v, %v; want held in term 3", st, err)
	}
}

// TestLeaseFenceRefusesDeposedHolder: a write fenced by a lease commits
// while its holder holds the lease and is refused, committing nothing,
// once the lease expired or another holder took it, even if the deposed
// holder wakes up before noticing.
func TestLeaseFenceRefusesDeposedHolder(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Start(t)
	a, b := openURL(t, url), openURL(t, url)
	sa, sb := meta.New(a, meta.Options{}), meta.New(b, meta.Options{})
	// Long leases except the one that must expire (see above).
	const ttl, short = time.Minute, 300 * time.Millisecond

	st, err := a.AcquireLease(ctx, "mgmt", "A", "a:1", ttl)
	if err != nil || !st.Held {
		t.Fatalf("A: %+v, %v", st, err)
	}
	fenceA := a.LeaseFence("mgmt", "A", st.Term)
	v, err := sa.PutBlobFenced(ctx, "map", []byte("epoch 1 by A"), 0, fenceA)
	if err != nil {
		t.Fatalf("the holder's write: %v", err)
	}
	if st, err := a.AcquireLease(ctx, "mgmt", "A", "a:1", short); err != nil || !st.Held {
		t.Fatalf("A renews for a short lease: %+v, %v", st, err)
	}
	time.Sleep(short + 200*time.Millisecond) // A pauses past its lease
	if _, err := sa.PutBlobFenced(ctx, "map", []byte("expired A"), v, fenceA); !errors.Is(err, postgres.ErrLeaseLost) {
		t.Fatalf("write of a holder whose lease expired: %v, want ErrLeaseLost", err)
	}
	st, err = b.AcquireLease(ctx, "mgmt", "B", "b:1", ttl)
	if err != nil || !st.Held {
		t.Fatalf("B: %+v, %v", st, err)
	}
	fenceB := b.LeaseFence("mgmt", "B", st.Term)
	// A wakes up and writes on the version it read: refused.
	if _, err := sa.PutBlobFenced(ctx, "map", []byte("deposed A"), v, fenceA); !errors.Is(err, postgres.ErrLeaseLost) {
		t.Fatalf("write of the deposed holder: %v, want ErrLeaseLost", err)
	}
	// A renewing its lease cannot bring it back while B holds it.
	if st, err := a.AcquireLease(ctx, "mgmt", "A", "a:1", ttl); err != nil || st.Held {
		t.Fatalf("A renews after B took over: %+v, %v; want refused", st, err)
	}
	if _, err := sa.PutBlobFenced(ctx, "map", []byte("deposed A"), v, fenceA); !errors.Is(err, postgres.ErrLeaseLost) {
		t.Fatalf("write of the deposed holder after its renewal failed: %v, want ErrLeaseLost", err)
	}
	if _, err := sb.PutBlobFenced(ctx, "map", []byte("epoch 2 by B"), v, fenceB); err != nil {
		t.Fatalf("the new holder's write: %v", err)
	}
	got, ver, err := sb.GetBlob(ctx, "map")
	if err != nil || string(got) != "epoch 2 by B" || ver != 2 {
		t.Fatalf("stored: %q version %d, %v; want B's write at version 2", got, ver, err)
	}
}

func openURL(t *testing.T, url string) *postgres.Engine {
	e, err := postgres.Open(context.Background(), url, testOwner)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}
