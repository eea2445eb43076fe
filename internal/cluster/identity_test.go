package cluster

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"poolfs/internal/client"
	"poolfs/internal/identity"
	"poolfs/internal/meta/pgtest"
	"poolfs/internal/mgmt"
	"poolfs/internal/rpc"
)

// issueFrom gives the node of dir an identity signed by the CA of the
// first host's directory first, as enrolment would.
func issueFrom(t *testing.T, first, dir string, role identity.Role, name string) {
	t.Helper()
	ca, err := identity.LoadCA(first)
	if err != nil {
		t.Fatal(err)
	}
	if err := issueLocally(dir, ca, role, name); err != nil {
		t.Fatal(err)
	}
}

// identityCluster makes a cluster (its CA, identities and tokens) in a
// new directory, starts its management service over a new PostgreSQL
// server, and returns the first host's directory, the service, and join,
// which makes a machine's directory beside first with the token of class.
// startStorageS1 starts storage server s1 with one 64 MiB drive in the
// joined directory dir; it is closed when the test ends.
func startStorageS1(ctx context.Context, t *testing.T, dir string) *StorageNode {
	t.Helper()
	s, err := StartStorage(ctx, StorageConfig{Dir: dir, Server: "s1", Drives: []string{filepath.Join(dir, "d0")}, DriveSize: 64 << 20, Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// servePing serves test.Ping, until the test ends, on an RPC server of the
// identity in dir that follows the cluster's revocations, as the metadata
// service does (FollowRevocations), and returns its address.
func servePing(ctx context.Context, t *testing.T, dir string, secret []byte) string {
	t.Helper()
	ctx, stop := context.WithCancel(ctx)
	t.Cleanup(stop)
	opts, err := FollowRevocations(ctx, dir, rpc.ServerOptions{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ms := rpc.NewServer(secret, opts)
	ms.Handle("test.Ping", func(context.Context, *rpc.Request) (*rpc.Response, error) { return nil, nil })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go ms.Serve(ln)
	t.Cleanup(func() { ms.Close() })
	return ln.Addr().String()
}

func identityCluster(t *testing.T) (first string, m *MgmtNode, join func(name, class string) string) {
	t.Helper()
	return identityClusterLifetime(t, 0)
}

// identityClusterLifetime is identityCluster whose management service
// issues certificates of lifetime (0: the default).
func identityClusterLifetime(t *testing.T, lifetime time.Duration) (first string, m *MgmtNode, join func(name, class string) string) {
	t.Helper()
	url := pgtest.Start(t)
	root := t.TempDir()
	first = filepath.Join(root, "first")
	if _, err := Create(first, "id", "127.0.0.1:1"); err != nil {
		t.Fatal(err)
	}
	m, err := StartMgmt(context.Background(), MgmtConfig{Dir: first, DB: url, Listen: "127.0.0.1:0", CertLifetime: lifetime})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	info, _, err := ReadInfo(first)
	if err != nil {
		t.Fatal(err)
	}
	info.Mgmt = m.Addr
	if err := writeInfo(first, info); err != nil {
		t.Fatal(err)
	}
	join = func(name, class string) string {
		tok, err := ReadToken(first, class)
		if err != nil {
			t.Fatal(err)
		}
		tok.Mgmt = m.Addr
		dir := filepath.Join(root, name)
		if err := Join(dir, tok); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	return first, m, join
}

// TestEnrolmentAndRoles: over a real management service, a client token
// enrols a client and nothing else; a client certificate reads the map
// but cannot register drives or change the map; a server token's storage
// server registers its drives; certificates of another CA or expired are
// refused; every key and certificate file is 0600.
func TestEnrolmentAndRoles(t *testing.T) {
	ctx := context.Background()
	first, m, join := identityCluster(t)
	dial := func(dir string) (*mgmt.Client, error) {
		info, secret, err := ReadInfo(dir)
		if err != nil {
			t.Fatal(err)
		}
		mc, mclose, err := DialMgmt(info, secret)
		if err == nil {
			t.Cleanup(func() { mclose() })
		}
		return mc, err
	}

	// A client token does not enrol a server, and leaves no identity.
	host := join("host", classClient)
	err := EnsureIdentity(ctx, host, identity.RoleServer, "s1")
	if !errors.Is(err, rpc.ErrForbidden) || !strings.Contains(err.Error(), "a client token enrols clients only") {
		t.Fatalf("client token enrolling a server: %v", err)
	}
	if _, err := identity.Load(host); !errors.Is(err, identity.ErrNoIdentity) {
		t.Fatalf("identity after a refused enrolment: %v", err)
	}
	if _, err := StartStorage(ctx, StorageConfig{Dir: host, Server: "s1", Drives: []string{filepath.Join(host, "d0")}, DriveSize: 64 << 20, Listen: "127.0.0.1:0"}); !errors.Is(err, rpc.ErrForbidden) {
		t.Fatalf("storage server with a client token: %v, want ErrForbidden", err)
	}
	// It enrols a client, which reads the map and nothing more.
	if err := ensureClientIdentity(ctx, host); err != nil {
		t.Fatal(err)
	}
	if id := identityOf(t, host); id.Cert.Role != identity.RoleClient {
		t.Fatalf("client identity of role %s", id.Cert.Role)
	}
	mc, err := dial(host)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mc.Map(ctx); err != nil {
		t.Fatalf("client reading the map: %v", err)
	}
	if _, err := mc.RegisterServer(ctx, mgmt.ServerSpec{ID: "evil", Addr: "127.0.0.1:9"}); !errors.Is(err, rpc.ErrForbidden) {
		t.Fatalf("client registering as a storage server: %v, want ErrForbidden", err)
	}
	if _, err := mc.CreatePoolOfServers(ctx, mgmt.PoolOfServers{Name: "default"}); !errors.Is(err, rpc.ErrForbidden) {
		t.Fatalf("client making a pool: %v, want ErrForbidden", err)
	}

	// A server token's storage server enrols and registers its drives.
	srv := join("srv", classServer)
	s := startStorageS1(ctx, t, srv)
	if id, err := identity.Load(srv); err != nil || id.Cert.Role != identity.RoleServer || id.Cert.Name != "s1" {
		t.Fatalf("server identity: %v", err)
	}
	sc, err := dial(srv)
	if err != nil {
		t.Fatal(err)
	}
	// (Its handler runs: it refuses a server of no drives.)
	if _, err := sc.RegisterServer(ctx, mgmt.ServerSpec{ID: "s1", Addr: s.Addr}); err == nil || errors.Is(err, rpc.ErrForbidden) {
		t.Fatalf("server registering no drives: %v, want the handler's refusal", err)
	}

	// Another cluster's certificate, and an expired one, are refused.
	stranger := filepath.Join(filepath.Dir(first), "stranger")
	if _, err := Create(stranger, "", m.Addr); err != nil {
		t.Fatal(err)
	}
	if _, err := dial(stranger); !errors.Is(err, rpc.ErrAuth) {
		t.Fatalf("node of another CA: %v, want ErrAuth", err)
	}
	ca, err := identity.LoadCA(first)
	if err != nil {
		t.Fatal(err)
	}
	old := join("old", classServer)
	pub, priv, _ := identity.NewKey()
	cert, err := ca.Issue("old", identity.RoleMgmt, 1, time.Now().Add(-time.Second), pub)
	if err != nil {
		t.Fatal(err)
	}
	if err := (&identity.Identity{Cert: cert, Key: priv}).Save(old); err != nil {
		t.Fatal(err)
	}
	if _, err := dial(old); !errors.Is(err, rpc.ErrAuth) || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("expired certificate: %v, want ErrAuth", err)
	}

	// A client may not reconstruct stripes on a storage server; a server may.
	_, secret, _ := ReadInfo(host)
	hostCreds, err := loadCreds(host)
	if err != nil {
		t.Fatal(err)
	}
	srvCreds, err := loadCreds(srv)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		who       string
		cr        creds
		forbidden bool
	}{{"client", hostCreds, true}, {"server", srvCreds, false}} {
		rc, err := rpc.Dial(s.Addr, secret, tc.cr.client(rpc.ClientOptions{}, identity.RoleServer))
		if err != nil {
			t.Fatal(err)
		}
		err = rc.Call(ctx, "storage.Reconstruct", struct{}{}, nil, nil)
		rc.Close()
		if errors.Is(err, rpc.ErrForbidden) != tc.forbidden {
			t.Fatalf("%s calling storage.Reconstruct: %v", tc.who, err)
		}
	}

	// Revocation: a client may not revoke; the first host revokes the
	// client, and the management service and the storage server refuse
	// it, on its open connection and on new ones.
	if err := mc.Revoke(ctx, "s1"); !errors.Is(err, rpc.ErrForbidden) {
		t.Fatalf("client revoking: %v, want ErrForbidden", err)
	}
	admin, err := dial(first)
	if err != nil {
		t.Fatal(err)
	}
	hostName := identityOf(t, host).Cert.Name
	if err := admin.Revoke(ctx, hostName); err != nil {
		t.Fatal(err)
	}
	refused := func(what string, try func() error) {
		t.Helper()
		for deadline := time.Now().Add(10 * revokedEvery); ; time.Sleep(100 * time.Millisecond) {
			err := try()
			if err != nil && !errors.Is(err, rpc.ErrForbidden) && !errors.Is(err, rpc.ErrAuth) {
				t.Fatalf("%s: %v, want a refusal", what, err)
			}
			if err != nil && strings.Contains(err.Error(), "revoked") {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s still served %v after the node was revoked: %v", what, 10*revokedEvery, err)
			}
		}
	}
	refused("open connection to mgmt", func() error { _, err := mc.Map(ctx); return err })
	refused("new connection to mgmt", func() error { _, err := dial(host); return err })
	refused("new connection to the storage server", func() error {
		rc, err := rpc.Dial(s.Addr, secret, hostCreds.client(rpc.ClientOptions{}, identity.RoleServer))
		if err == nil {
			rc.Close()
		}
		return err
	})
	if _, err := sc.Map(ctx); err != nil {
		t.Fatalf("the server, not revoked: %v", err)
	}
	// A service started outside the package (the metadata service) with
	// FollowRevocations refuses the revoked node too, and serves others.
	msAddr := servePing(ctx, t, srv, secret)
	refused("new connection to a metadata service", func() error {
		rc, err := rpc.Dial(msAddr, secret, hostCreds.client(rpc.ClientOptions{}))
		if err == nil {
			rc.Close()
		}
		return err
	})
	firstCreds, err := loadCreds(first)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rpc.Dial(msAddr, secret, firstCreds.client(rpc.ClientOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.Call(ctx, "test.Ping", nil, nil, nil); err != nil {
		t.Fatalf("a node not revoked: %v", err)
	}
	rc.Close()

	for _, dir := range []string{first, host, srv} {
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			st, err := os.Stat(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			if !st.IsDir() && (strings.HasPrefix(e.Name(), "node.") || strings.HasPrefix(e.Name(), "ca.") || strings.HasPrefix(e.Name(), "enroll")) && st.Mode().Perm() != 0o600 {
				t.Errorf("%s: mode %v, want 0600", filepath.Join(dir, e.Name()), st.Mode().Perm())
			}
		}
	}
}

func identityOf(t *testing.T, dir string) *identity.Identity {
	t.Helper()
	id, err := identity.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// Create writes the CA key and the first host's key 0600, and neither
// appears in a join token (which carries only the CA's public key).
func TestCreateKeepsKeysPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "c")
	tok, err := Create(dir, "", "10.0.0.1:9401")
	if err != nil {
		t.Fatal(err)
	}
	client, err := ReadToken(dir, classClient)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := identity.LoadCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !ed25519.PublicKey(tok.CA).Equal(ca.Public()) || client.Class != classClient || bytes.Equal(client.Enroll, tok.Enroll) {
		t.Fatalf("tokens: CA %x, classes %s/%s", tok.CA, tok.Class, client.Class)
	}
	for _, f := range []string{identity.CAKeyFile, identity.NodeKeyFile} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		st, _ := os.Stat(filepath.Join(dir, f))
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v", f, st.Mode().Perm())
		}
		seed, _ := hex.DecodeString(strings.TrimSpace(string(b)))
		for _, s := range []string{tok.String(), client.String()} {
			raw, _ := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(s, tokenPrefix))
			if len(seed) != 32 || bytes.Contains(raw, []byte(hex.EncodeToString(seed))) || bytes.Contains(raw, []byte(base64.StdEncoding.EncodeToString(seed))) {
				t.Fatalf("a token holds %s", f)
			}
		}
	}
}

// TestClientRefusesRevokedServer: a client (Connect) follows the
// revocation list: once storage server s1 is revoked, the client's
// connection to it that was open before stops serving within
// revokedEvery and rpc.DefaultRecheckEvery (the call fails as
// unavailable, saying s1 was revoked), and new connections are refused.
func TestClientRefusesRevokedServer(t *testing.T) {
	ctx := context.Background()
	first, _, join := identityCluster(t)
	info, secret, err := ReadInfo(first)
	if err != nil {
		t.Fatal(err)
	}
	srv := join("srv", classServer)
	s := startStorageS1(ctx, t, srv)
	// A metadata service for Connect to find: an RPC server of a meta
	// certificate, announced to the management service.
	md := join("meta", classServer)
	if err := EnsureIdentity(ctx, md, identity.RoleMeta, "meta"); err != nil {
		t.Fatal(err)
	}
	mcr, err := loadCreds(md)
	if err != nil {
		t.Fatal(err)
	}
	ms := rpc.NewServer(secret, mcr.server(rpc.ServerOptions{}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go ms.Serve(ln)
	t.Cleanup(func() { ms.Close() })
	if err := AnnounceMeta(ctx, md, ln.Addr().String()); err != nil {
		t.Fatal(err)
	}

	conn, err := Connect(ctx, join("host", classClient), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	dialS1 := func() error {
		rc, err := rpc.Dial(s.Addr, secret, conn.creds.client(rpc.ClientOptions{}, identity.RoleServer))
		if err == nil {
			rc.Close()
		}
		return err
	}
	if err := dialS1(); err != nil {
		t.Fatalf("client dialing s1 before the revocation: %v", err)
	}
	open, err := rpc.Dial(s.Addr, secret, conn.creds.client(rpc.ClientOptions{}, identity.RoleServer))
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	if err := open.Call(ctx, "storage.Drives", nil, nil, nil); err != nil {
		t.Fatalf("call to s1 before the revocation: %v", err)
	}
	admin, mclose, err := DialMgmt(info, secret)
	if err != nil {
		t.Fatal(err)
	}
	defer mclose()
	revoked := time.Now()
	if err := admin.Revoke(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	bound := revokedEvery + rpc.DefaultRecheckEvery
	for deadline := revoked.Add(bound + 5*time.Second); ; time.Sleep(20 * time.Millisecond) {
		err := open.Call(ctx, "storage.Drives", nil, nil, nil)
		if errors.Is(err, rpc.ErrUnavailable) && errors.Is(err, identity.ErrRevoked) && strings.Contains(err.Error(), "s1") {
			t.Logf("the open connection to s1 stopped serving %v after the revocation (bound %v)", time.Since(revoked).Round(time.Millisecond), bound)
			break
		}
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("call to s1 on a connection opened before its revocation, %v after: %v, want it refused as revoked", time.Since(revoked), err)
		}
	}
	for deadline := time.Now().Add(10 * revokedEvery); ; time.Sleep(100 * time.Millisecond) {
		err := dialS1()
		if errors.Is(err, rpc.ErrAuth) && strings.Contains(err.Error(), "revoked") {
			break
		}
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("client dialing s1 after its revocation: %v, want it refused as revoked", err)
		}
	}
}
