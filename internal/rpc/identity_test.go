package rpc

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"poolfs/internal/identity"
)

// testCA issues identities for the identity tests.
type testCA struct {
	t  testing.TB
	ca *identity.CA
}

func newTestCA(t testing.TB) *testCA {
	ca, err := identity.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{t, ca}
}

func (c *testCA) issue(name string, role identity.Role, notAfter time.Time) *identity.Identity {
	pub, priv, err := identity.NewKey()
	if err != nil {
		c.t.Fatal(err)
	}
	cert, err := c.ca.Issue(name, role, 7, notAfter, pub)
	if err != nil {
		c.t.Fatal(err)
	}
	return &identity.Identity{Cert: cert, Key: priv}
}

func (c *testCA) trust(roles ...identity.Role) *identity.Trust {
	return &identity.Trust{CA: c.ca.Public(), Roles: roles, Revoked: func(c *identity.Cert) bool { return c.Name == "revoked" }}
}

// registerWhoAmI serves "test.WhoAmI", answering the caller's verified
// certificate, and "storage.Put", which only server certificates may call.
func registerWhoAmI(s *Server) {
	s.Handle("test.WhoAmI", func(ctx context.Context, req *Request) (*Response, error) {
		p := PeerFrom(ctx)
		if p == nil {
			return &Response{Result: "nobody"}, nil
		}
		return &Response{Result: p.Role.String() + " " + p.Name}, nil
	})
	s.Handle("storage.Put", func(ctx context.Context, req *Request) (*Response, error) { return nil, nil })
}

func serverOnly(method string, peer *identity.Cert) error {
	if strings.HasPrefix(method, "storage.") && (peer == nil || peer.Role != identity.RoleServer) {
		return errors.New("storage methods are for servers only")
	}
	return nil
}

// Every connection between nodes that trust the cluster CA proves both
// certificates; a certificate from another CA, expired, revoked, altered,
// of the wrong role, or not proved by its key is refused at the handshake.
func TestIdentityHandshake(t *testing.T) {
	ca, other := newTestCA(t), newTestCA(t)
	later := time.Now().Add(time.Hour)
	server := ca.issue("srv1", identity.RoleServer, later)
	client := ca.issue("host7", identity.RoleClient, later)

	tampered := *client
	raw := append([]byte(nil), client.Cert.Encoded()...)
	raw[5+7] ^= 1 // serial 7 → 6
	var err error
	if tampered.Cert, err = identity.Decode(raw); err != nil {
		t.Fatal(err)
	}
	stolen := *client // its certificate, another key
	_, stolen.Key, _ = identity.NewKey()

	for _, tc := range []struct {
		name         string
		serverID     *identity.Identity
		clientID     *identity.Identity
		clientTrusts *identity.Trust
		want         string // "" : the call works; else in the Dial error
	}{
		{"both proved", server, client, ca.trust(identity.RoleServer), ""},
		{"client from another CA", server, other.issue("host7", identity.RoleClient, later), ca.trust(), "not signed by the cluster CA"},
		{"client expired", server, ca.issue("host7", identity.RoleClient, time.Now().Add(-time.Second)), ca.trust(), "certificate expired"},
		{"client revoked", server, ca.issue("revoked", identity.RoleClient, later), ca.trust(), "certificate revoked"},
		{"client certificate altered", server, &tampered, ca.trust(), "not signed by the cluster CA"},
		{"client certificate without its key", server, &stolen, ca.trust(), "did not prove its key"},
		{"client without certificate", server, nil, ca.trust(), "presented no certificate"},
		{"server from another CA", other.issue("srv1", identity.RoleServer, later), client, ca.trust(), "not signed by the cluster CA"},
		{"server without certificate", nil, client, ca.trust(), "presented no certificate"},
		{"client posing as a server", ca.issue("host8", identity.RoleClient, later), client, ca.trust(identity.RoleServer), "certificate of the wrong role"},
		{"server expired", ca.issue("srv1", identity.RoleServer, time.Now().Add(-time.Second)), client, ca.trust(), "certificate expired"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, addr := startServer(t, ServerOptions{Identity: identity.NewCurrent(tc.serverID), Peers: ca.trust()}, registerWhoAmI)
			c, err := Dial(addr, testSecret, ClientOptions{Identity: identity.NewCurrent(tc.clientID), Peers: tc.clientTrusts})
			if tc.want != "" {
				if err == nil {
					c.Close()
				}
				if !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("dial: %v, want ErrAuth saying %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			var who string
			if err := c.Call(t.Context(), "test.WhoAmI", nil, nil, &who); err != nil || who != "client host7" {
				t.Fatalf("WhoAmI: %q, %v", who, err)
			}
		})
	}
}

// ServerOptions.Authorize sees the caller's verified role: a client
// certificate cannot call a server-only method, a server certificate can.
func TestAuthorizeByRole(t *testing.T) {
	ca := newTestCA(t)
	later := time.Now().Add(time.Hour)
	_, addr := startServer(t, ServerOptions{Identity: identity.NewCurrent(ca.issue("srv1", identity.RoleServer, later)), Peers: ca.trust(), Authorize: serverOnly}, registerWhoAmI)
	client := dialTest(t, addr, ClientOptions{Identity: identity.NewCurrent(ca.issue("host7", identity.RoleClient, later)), Peers: ca.trust(identity.RoleServer)})
	err := client.Call(t.Context(), "storage.Put", nil, nil, nil)
	if !errors.Is(err, ErrForbidden) {
		t.Fatalf("client calling storage.Put: %v, want ErrForbidden", err)
	}
	if err := client.Call(t.Context(), "test.WhoAmI", nil, nil, nil); err != nil {
		t.Fatalf("client calling an open method after a refusal: %v", err)
	}
	peer := dialTest(t, addr, ClientOptions{Identity: identity.NewCurrent(ca.issue("srv2", identity.RoleServer, later)), Peers: ca.trust(identity.RoleServer)})
	if err := peer.Call(t.Context(), "storage.Put", nil, nil, nil); err != nil {
		t.Fatalf("server calling storage.Put: %v", err)
	}
}

// With AllowNoCert a client without a certificate gets in with no peer,
// and Authorize alone decides what it may call; a bad certificate is
// still refused.
func TestAllowNoCert(t *testing.T) {
	ca, other := newTestCA(t), newTestCA(t)
	later := time.Now().Add(time.Hour)
	authorize := func(method string, peer *identity.Cert) error {
		if peer == nil && method != "test.WhoAmI" {
			return errors.New("a certificate is needed")
		}
		return nil
	}
	_, addr := startServer(t, ServerOptions{Identity: identity.NewCurrent(ca.issue("mgmt", identity.RoleMgmt, later)), Peers: ca.trust(), AllowNoCert: true, Authorize: authorize}, registerWhoAmI)
	anon := dialTest(t, addr, ClientOptions{Peers: ca.trust(identity.RoleMgmt)})
	var who string
	if err := anon.Call(t.Context(), "test.WhoAmI", nil, nil, &who); err != nil || who != "nobody" {
		t.Fatalf("WhoAmI without a certificate: %q, %v", who, err)
	}
	if err := anon.Call(t.Context(), "storage.Put", nil, nil, nil); !errors.Is(err, ErrForbidden) {
		t.Fatalf("storage.Put without a certificate: %v, want ErrForbidden", err)
	}
	if _, err := Dial(addr, testSecret, ClientOptions{Identity: identity.NewCurrent(other.issue("x", identity.RoleServer, later))}); !errors.Is(err, ErrAuth) {
		t.Fatalf("certificate of another CA: %v, want ErrAuth", err)
	}
	if err := (ServerOptions{Peers: ca.trust(), AllowNoCert: true}).Validate(); err == nil {
		t.Fatal("AllowNoCert without Authorize validated")
	}
}

// FuzzCheckPeer feeds arbitrary identity frames to checkPeer: it must
// not panic, and must accept only the one certificate and signature made
// for this transcript.
func FuzzCheckPeer(f *testing.F) {
	ca := newTestCA(f)
	id := ca.issue("srv1", identity.RoleServer, time.Unix(1<<40, 0))
	transcript := bytes.Repeat([]byte{7}, 2*nonceSize+2*pubSize)
	good := identityArgs(id, idLabelServer, transcript)
	f.Add(good)
	f.Add(good[:len(good)-1])
	f.Add([]byte{})
	f.Add(identityArgs(id, idLabelClient, transcript))
	trust := ca.trust()
	f.Fuzz(func(t *testing.T, args []byte) {
		c, err := checkPeer(args, idLabelServer, transcript, trust)
		if (err == nil) != bytes.Equal(args, good) {
			t.Fatalf("checkPeer(%x): %v", args, err)
		}
		if err == nil && c.Name != "srv1" {
			t.Fatalf("accepted %s", c)
		}
		if err != nil && !errors.Is(err, ErrAuth) {
			t.Fatalf("error %v is not ErrAuth", err)
		}
	})
}
