package rpc

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"poolfs/internal/identity"
)

// revocationList is a revocation list that changes while connections
// are open, as the cluster's does.
type revocationList struct {
	mu    sync.Mutex
	names map[string]bool
}

func (r *revocationList) revoke(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.names == nil {
		r.names = map[string]bool{}
	}
	r.names[name] = true
}

func (r *revocationList) revoked(c *identity.Cert) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.names[c.Name]
}

func (r *revocationList) trust(ca *testCA, roles ...identity.Role) *identity.Trust {
	return &identity.Trust{CA: ca.ca.Public(), Roles: roles, Revoked: r.revoked}
}

// registerBlock serves "test.Block", which returns when its context ends
// (closing started first) or release is closed.
func registerBlock(started chan<- struct{}, release <-chan struct{}, ended chan<- error) func(*Server) {
	return func(s *Server) {
		s.Handle("test.Block", func(ctx context.Context, req *Request) (*Response, error) {
			started <- struct{}{}
			select {
			case <-ctx.Done():
				ended <- ctx.Err()
				return nil, ctx.Err()
			case <-release:
				ended <- nil
				return &Response{Result: "released"}, nil
			}
		})
	}
}

// A client revoked after its handshake has the next call on its open
// connection refused with the reason, and the connection closed; a new
// connection is refused at the handshake.
func TestRevokedClientOpenConnection(t *testing.T) {
	ca := newTestCA(t)
	later := time.Now().Add(time.Hour)
	var rev revocationList
	srv, addr := startServer(t, ServerOptions{Identity: identity.NewCurrent(ca.issue("srv1", identity.RoleServer, later)), Peers: rev.trust(ca)}, registerWhoAmI)
	c := dialTest(t, addr, ClientOptions{Identity: identity.NewCurrent(ca.issue("host7", identity.RoleClient, later))})
	var who string
	if err := c.Call(t.Context(), "test.WhoAmI", nil, nil, &who); err != nil || who != "client host7" {
		t.Fatalf("WhoAmI before revocation: %q, %v", who, err)
	}
	rev.revoke("host7")
	err := c.Call(t.Context(), "test.WhoAmI", nil, nil, &who)
	if !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), "certificate revoked") {
		t.Fatalf("call of a revoked client on its open connection: %v, want ErrAuth saying the certificate was revoked", err)
	}
	waitFor(t, "the revoked client's connection to close", func() bool { return srv.Stats().Conns == 0 })
	if _, err := Dial(addr, testSecret, ClientOptions{Identity: identity.NewCurrent(ca.issue("host7", identity.RoleClient, later))}); !errors.Is(err, ErrAuth) {
		t.Fatalf("new connection of a revoked client: %v, want ErrAuth", err)
	}
}

// A call in flight from a client revoked meanwhile is cut within
// RecheckEvery: its handler's context ends and the connection closes.
func TestRevokedClientCallInFlight(t *testing.T) {
	ca := newTestCA(t)
	later := time.Now().Add(time.Hour)
	var rev revocationList
	started, release, ended := make(chan struct{}, 1), make(chan struct{}), make(chan error, 1)
	defer close(release)
	srv, addr := startServer(t, ServerOptions{Identity: identity.NewCurrent(ca.issue("srv1", identity.RoleServer, later)), Peers: rev.trust(ca), RecheckEvery: 20 * time.Millisecond},
		registerBlock(started, release, ended))
	c := dialTest(t, addr, ClientOptions{Identity: identity.NewCurrent(ca.issue("host7", identity.RoleClient, later))})
	done := make(chan error, 1)
	go func() { done <- c.Call(context.Background(), "test.Block", nil, nil, nil) }()
	<-started
	rev.revoke("host7")
	if err := within(t, ended); err == nil {
		t.Fatal("the handler of the revoked client ran to its end")
	}
	if err := within(t, done); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("call in flight of a revoked client: %v, want ErrUnavailable", err)
	}
	waitFor(t, "the revoked client's connection to close", func() bool { return srv.Stats().Conns == 0 })
}

// A client does not reuse its open connection to a server revoked since
// the handshake: the call dials again, the revoked server is refused,
// and the error says the server is unavailable because it was revoked.
func TestRevokedServerOpenConnection(t *testing.T) {
	ca := newTestCA(t)
	later := time.Now().Add(time.Hour)
	var rev revocationList
	_, addr := startServer(t, ServerOptions{Identity: identity.NewCurrent(ca.issue("srv1", identity.RoleServer, later))}, registerWhoAmI)
	c := dialTest(t, addr, ClientOptions{Identity: identity.NewCurrent(ca.issue("host7", identity.RoleClient, later)), Peers: rev.trust(ca, identity.RoleServer)})
	if err := c.Call(t.Context(), "test.WhoAmI", nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	rev.revoke("srv1")
	err := c.Call(t.Context(), "test.WhoAmI", nil, nil, nil)
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, identity.ErrRevoked) {
		t.Fatalf("call to a revoked server: %v, want ErrUnavailable and identity.ErrRevoked", err)
	}
}

// A call in flight to a server revoked meanwhile fails within
// RecheckEvery, saying why, though the server would answer it.
func TestRevokedServerCallInFlight(t *testing.T) {
	ca := newTestCA(t)
	later := time.Now().Add(time.Hour)
	var rev revocationList
	started, release, ended := make(chan struct{}, 1), make(chan struct{}), make(chan error, 1)
	defer close(release)
	_, addr := startServer(t, ServerOptions{Identity: identity.NewCurrent(ca.issue("srv1", identity.RoleServer, later))}, registerBlock(started, release, ended))
	c := dialTest(t, addr, ClientOptions{Identity: identity.NewCurrent(ca.issue("host7", identity.RoleClient, later)), Peers: rev.trust(ca, identity.RoleServer),
		RecheckEvery: 20 * time.Millisecond})
	done := make(chan error, 1)
	go func() { done <- c.Call(context.Background(), "test.Block", nil, nil, nil) }()
	<-started
	rev.revoke("srv1")
	err := within(t, done)
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, identity.ErrRevoked) || !strings.Contains(err.Error(), "srv1") {
		t.Fatalf("call in flight to a revoked server: %v, want ErrUnavailable and identity.ErrRevoked naming srv1", err)
	}
}

// A connection whose server certificate has expired since its
// handshake is not reused: the next call dials again and meets the
// certificate the server shows now (still the expired one, here).
func TestExpiredServerConnectionReplaced(t *testing.T) {
	ca := newTestCA(t)
	now := time.Now()
	var clock struct {
		sync.Mutex
		t time.Time
	}
	clock.t = now
	trust := ca.trust(identity.RoleServer)
	trust.Revoked = nil
	trust.Now = func() time.Time { clock.Lock(); defer clock.Unlock(); return clock.t }
	srv := ca.issue("srv1", identity.RoleServer, now.Add(time.Minute))
	_, addr := startServer(t, ServerOptions{Identity: identity.NewCurrent(srv)}, registerWhoAmI)
	c := dialTest(t, addr, ClientOptions{Identity: identity.NewCurrent(ca.issue("host7", identity.RoleClient, now.Add(time.Hour))), Peers: trust})
	if err := c.Call(t.Context(), "test.WhoAmI", nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	clock.Lock()
	clock.t = now.Add(2 * time.Minute)
	clock.Unlock()
	err := c.Call(t.Context(), "test.WhoAmI", nil, nil, nil)
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, identity.ErrExpired) {
		t.Fatalf("call to a server whose certificate expired: %v, want ErrUnavailable and identity.ErrExpired", err)
	}
}

// within returns what ch delivers, failing the test if nothing comes in
// 10 s (the recheck bound, 20 ms here, with plenty of room).
func within(t *testing.T, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("still running 10 s after the revocation")
		return nil
	}
}

// A client whose identity is renewed (Current.Set) moves its calls to
// connections that present the new certificate, so it keeps working past
// the old one's expiry, on which the server refuses calls.
func TestRenewedIdentityOutlivesOldCertificate(t *testing.T) {
	ca := newTestCA(t)
	now := time.Now()
	var clock struct {
		sync.Mutex
		t time.Time
	}
	clock.t = now
	trust := ca.trust()
	trust.Now = func() time.Time { clock.Lock(); defer clock.Unlock(); return clock.t }
	_, addr := startServer(t, ServerOptions{Identity: identity.NewCurrent(ca.issue("srv1", identity.RoleServer, now.Add(time.Hour))), Peers: trust}, func(s *Server) {
		s.Handle("test.Expiry", func(ctx context.Context, req *Request) (*Response, error) {
			return &Response{Result: PeerFrom(ctx).NotAfter.Unix()}, nil
		})
	})
	old := ca.issue("host7", identity.RoleClient, now.Add(time.Minute))
	cur := identity.NewCurrent(old)
	c := dialTest(t, addr, ClientOptions{Identity: cur})
	var seen int64
	if err := c.Call(t.Context(), "test.Expiry", nil, nil, &seen); err != nil || seen != old.Cert.NotAfter.Unix() {
		t.Fatalf("call with the first certificate: server saw expiry %d, %v", seen, err)
	}
	cert, err := ca.ca.Issue("host7", identity.RoleClient, 8, now.Add(time.Hour), old.Cert.Key) // same key
	if err != nil {
		t.Fatal(err)
	}
	renewed := &identity.Identity{Cert: cert, Key: old.Key}
	cur.Set(renewed)
	clock.Lock()
	clock.t = now.Add(2 * time.Minute) // the first certificate has expired
	clock.Unlock()
	for i := range 3 {
		if err := c.Call(t.Context(), "test.Expiry", nil, nil, &seen); err != nil || seen != renewed.Cert.NotAfter.Unix() {
			t.Fatalf("call %d after the first certificate expired: server saw expiry %d, %v; want the renewed certificate's %d", i, seen, err, renewed.Cert.NotAfter.Unix())
		}
	}
}
