package cluster

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"poolfs/internal/client"
	"poolfs/internal/identity"
	"poolfs/internal/rpc"
)

// TestCertificatesRenewedBeforeExpiry: with certificates of a 3 s
// lifetime, over real sockets, a storage server, a metadata service
// (FollowRevocations) and a client (Connect) keep working past the
// expiry of the certificates they enrolled with (for half a lifetime
// after the last one): each renewed its own in time, in memory and on
// disk.
func TestCertificatesRenewedBeforeExpiry(t *testing.T) {
	ctx := context.Background()
	const lifetime = 3 * time.Second
	first, _, join := identityClusterLifetime(t, lifetime)
	_, secret, err := ReadInfo(first)
	if err != nil {
		t.Fatal(err)
	}
	srv := join("srv", classServer)
	s := startStorageS1(ctx, t, srv)
	md := join("meta", classServer)
	if err := EnsureIdentity(ctx, md, identity.RoleMeta, "meta"); err != nil {
		t.Fatal(err)
	}
	msAddr := servePing(ctx, t, md, secret)
	if err := AnnounceMeta(ctx, md, msAddr); err != nil {
		t.Fatal(err)
	}
	host := join("host", classClient)
	conn, err := Connect(ctx, host, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	enrolled := map[string]time.Time{}
	var last time.Time
	for _, dir := range []string{srv, md, host} {
		enrolled[dir] = identityOf(t, dir).Cert.NotAfter
		if enrolled[dir].After(last) {
			last = enrolled[dir]
		}
	}
	s1, err := rpc.Dial(s.Addr, secret, conn.creds.client(rpc.ClientOptions{}, identity.RoleServer))
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Close()
	meta, err := rpc.Dial(msAddr, secret, conn.creds.client(rpc.ClientOptions{}, identity.RoleMeta))
	if err != nil {
		t.Fatal(err)
	}
	defer meta.Close()
	calls := map[string]func() error{
		"client to mgmt":         func() error { _, err := conn.Mgmt.Map(ctx); return err },
		"client to storage":      func() error { return s1.Call(ctx, "storage.Drives", nil, nil, nil) },
		"client to meta":         func() error { return meta.Call(ctx, "test.Ping", nil, nil, nil) },
		"storage server to mgmt": func() error { _, err := s.mc.Map(ctx); return err },
	}
	for time.Now().Before(last.Add(lifetime / 2)) {
		for what, call := range calls {
			if err := call(); err != nil {
				t.Fatalf("%s, %v after the first certificates expired: %v", what, time.Since(last).Round(time.Millisecond), err)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	for dir, was := range enrolled {
		if now := identityOf(t, dir).Cert.NotAfter; !now.After(was) {
			t.Errorf("%s: node.cert still expires at %v", filepath.Base(dir), now)
		}
	}
}

// FuzzCheckRenewed feeds arbitrary bytes to checkRenewed as the
// management service's answer to mgmt.Renew: it must not panic, and must
// accept only a certificate of the CA for the node's own name, role and
// key that expires later.
func FuzzCheckRenewed(f *testing.F) {
	ca, err := identity.NewCA()
	if err != nil {
		f.Fatal(err)
	}
	pub, _, _ := identity.NewKey()
	other, _, _ := identity.NewKey()
	at := time.Unix(1_800_000_000, 0)
	old, err := ca.Issue("s1", identity.RoleServer, 1, at, pub)
	if err != nil {
		f.Fatal(err)
	}
	good, _ := ca.Issue("s1", identity.RoleServer, 2, at.Add(time.Hour), pub)
	for _, c := range []*identity.Cert{good, old} {
		f.Add(c.Encoded())
	}
	for _, bad := range []struct {
		name string
		role identity.Role
		key  []byte
	}{{"s2", identity.RoleServer, pub}, {"s1", identity.RoleMgmt, pub}, {"s1", identity.RoleServer, other}} {
		c, _ := ca.Issue(bad.name, bad.role, 3, at.Add(time.Hour), bad.key)
		f.Add(c.Encoded())
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, err := checkRenewed(raw, old, ca.Public())
		if err == nil && (c.Name != "s1" || c.Role != identity.RoleServer || !bytes.Equal(c.Key, pub) || !c.NotAfter.After(old.NotAfter)) {
			t.Fatalf("accepted %s", c)
		}
		if bytes.Equal(raw, good.Encoded()) && err != nil {
			t.Fatalf("refused the good renewal: %v", err)
		}
	})
}

// TestExpiredNodeEnrolsAgain: a machine whose certificate expired (it was
// off through its renewal) enrols again under its name with the
// credential it joined with: a storage server at its start, and a running
// process whose renewal failed until the expiry.
func TestExpiredNodeEnrolsAgain(t *testing.T) {
	ctx := context.Background()
	first, _, join := identityCluster(t)
	ca, err := identity.LoadCA(first)
	if err != nil {
		t.Fatal(err)
	}
	expired := func(dir string, role identity.Role, name string) *identity.Identity {
		pub, priv, _ := identity.NewKey()
		cert, err := ca.Issue(name, role, 1, time.Now().Add(-time.Minute), pub)
		if err != nil {
			t.Fatal(err)
		}
		id := &identity.Identity{Cert: cert, Key: priv}
		if err := id.Save(dir); err != nil {
			t.Fatal(err)
		}
		return id
	}
	fresh := func(what string, id *identity.Identity, role identity.Role, name string) {
		t.Helper()
		if id.Cert.Role != role || id.Cert.Name != name || !time.Now().Before(id.Cert.NotAfter) {
			t.Fatalf("%s: identity %s, want an unexpired %s %s", what, id.Cert, role, name)
		}
	}

	srv := join("srv", classServer)
	expired(srv, identity.RoleServer, "s1")
	s, err := StartStorage(ctx, StorageConfig{Dir: srv, Server: "s1", Drives: []string{filepath.Join(srv, "d0")}, DriveSize: 64 << 20, Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatalf("storage server with an expired certificate: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	fresh("storage server after its start", identityOf(t, srv), identity.RoleServer, "s1")

	host := join("host", classClient)
	cr := creds{id: identity.NewCurrent(expired(host, identity.RoleClient, "host")), ca: ca.Public()}
	if err := enrolAgain(ctx, host, cr, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	fresh("running client, in memory", cr.id.Get(), identity.RoleClient, "host")
	fresh("running client, on disk", identityOf(t, host), identity.RoleClient, "host")
}
