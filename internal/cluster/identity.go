package cluster

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/subtle"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"poolfs/internal/identity"
	"poolfs/internal/mgmt"
	"poolfs/internal/rpc"
)

// Node identities (docs/rpc-security.md). `poolfs cluster create` makes
// the cluster CA on the first host, with that host's own identity (role
// mgmt) and two enrolment credentials, one per token class:
//
//	server  enrols any role: storage servers, metadata and management
//	        services, and machines that administer the cluster (role mgmt)
//	client  enrols role client only: mounts and read-only tools
//
// A node that joined holds the CA's public key and its token's credential;
// its first service to start makes the node's key pair locally and sends
// only the public key, with the credential, to mgmt.Enroll, which the
// leading management service answers if it holds the CA key (the first
// host's does). From then on every connection of the cluster proves both
// sides' certificates, and mgmtAuthorize decides by role.
//
// A directory without the CA's public key (`poolfs up`, a cluster made
// before identities) has no identity: its connections rest on the
// secret alone, as before.
const (
	classServer = "server"
	classClient = "client"
	enrollLen   = 32
	enrollFile  = "enroll" // a joined node's credential: "class hex"
	// certLifetime is how long an issued certificate is valid, by
	// default (MgmtConfig.CertLifetime); nodes renew theirs in its last
	// third (renew.go). Revoke a node that leaves (`poolfs cluster
	// revoke`) rather than wait.
	certLifetime = 365 * 24 * time.Hour
)

// createCA makes the CA, this first host's identity named name (role
// mgmt) and both enrolment credentials in dir.
func createCA(dir, name string) error {
	ca, err := identity.NewCA()
	if err != nil {
		return err
	}
	if err := ca.Save(dir); err != nil {
		return err
	}
	for _, class := range []string{classServer, classClient} {
		cred := make([]byte, enrollLen)
		rand.Read(cred)
		if err := writePrivate(filepath.Join(dir, "enroll-"+class), []byte(hex.EncodeToString(cred)+"\n")); err != nil {
			return err
		}
	}
	return issueLocally(dir, ca, identity.RoleMgmt, name)
}

// issueLocally gives the node of dir an identity signed by ca, which it
// holds itself.
func issueLocally(dir string, ca *identity.CA, role identity.Role, name string) error {
	pub, priv, err := identity.NewKey()
	if err != nil {
		return err
	}
	cert, err := ca.Issue(name, role, randomSerial(), time.Now().Add(certLifetime), pub)
	if err != nil {
		return err
	}
	return (&identity.Identity{Cert: cert, Key: priv}).Save(dir)
}

func randomSerial() uint64 {
	var b [8]byte
	rand.Read(b[:])
	return binary.BigEndian.Uint64(b[:])
}

func readHexFile(path string, n int) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	v, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(v) != n {
		return nil, fmt.Errorf("cluster: %s does not hold what poolfs wrote there", path)
	}
	return v, nil
}

// readEnrollCredential returns the credential of class: the first
// host's, or the one a joined machine joined with.
func readEnrollCredential(dir, class string) ([]byte, error) {
	if class != classServer && class != classClient {
		return nil, fmt.Errorf("cluster: token class %q: want server or client", class)
	}
	p := filepath.Join(dir, "enroll-"+class)
	if _, err := os.Stat(p); err != nil {
		if joined, cred, err := readEnrollFile(dir); err == nil && joined == class {
			return cred, nil
		}
		return nil, fmt.Errorf("cluster: %s holds no %s token: print it on the first host (`poolfs cluster token`)", dir, class)
	}
	return readHexFile(p, enrollLen)
}

func writeEnrollFile(dir, class string, cred []byte) error {
	return writePrivate(filepath.Join(dir, enrollFile), []byte(class+" "+hex.EncodeToString(cred)+"\n"))
}

func readEnrollFile(dir string) (class string, cred []byte, err error) {
	b, err := os.ReadFile(filepath.Join(dir, enrollFile))
	if err != nil {
		return "", nil, fmt.Errorf("cluster: %s has no node identity and no enrolment credential: join with `poolfs cluster join` (the token on standard input)", dir)
	}
	class, h, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
	cred, err = hex.DecodeString(h)
	if err != nil || len(cred) != enrollLen || (class != classServer && class != classClient) {
		return "", nil, fmt.Errorf("cluster: %s does not hold what poolfs wrote there", filepath.Join(dir, enrollFile))
	}
	return class, cred, nil
}

// creds are what a node proves itself with besides the secret: its
// identity and the CA it trusts. The zero value (no CA) is the
// secret-only mode of `poolfs up`.
type creds struct {
	id *identity.Current // renewal replaces what it holds (renew.go)
	ca ed25519.PublicKey
	// revoked, if set, is the revocation list peers are checked against.
	revoked func(*identity.Cert) bool
}

// loadCreds reads the creds of the node whose directory is dir.
func loadCreds(dir string) (creds, error) {
	if dir == "" {
		return creds{}, nil
	}
	ca, err := identity.LoadCAPublic(dir)
	if errors.Is(err, identity.ErrNoIdentity) {
		return creds{}, nil
	}
	if err != nil {
		return creds{}, err
	}
	id, err := identity.Load(dir)
	if err != nil {
		return creds{}, fmt.Errorf("cluster: this node's identity: %w", err)
	}
	return creds{id: identity.NewCurrent(id), ca: ca}, nil
}

func (c creds) trust(roles ...identity.Role) *identity.Trust {
	if c.ca == nil {
		return nil
	}
	return &identity.Trust{CA: c.ca, Roles: roles, Revoked: c.revoked}
}

// client returns o with the node's identity, accepting servers of roles.
func (c creds) client(o rpc.ClientOptions, roles ...identity.Role) rpc.ClientOptions {
	o.Identity, o.Peers = c.id, c.trust(roles...)
	return o
}

// server returns o with the node's identity, admitting any role.
func (c creds) server(o rpc.ServerOptions) rpc.ServerOptions {
	o.Identity, o.Peers = c.id, c.trust()
	return o
}

// EnsureIdentity gives the node of dir its key pair and certificate, of
// role and named name, if it has none yet: the first host signs with its
// own CA key; a joined node enrols with the management service. A
// directory without identities is left as it is. A node keeps its one
// identity: later calls, of any role, do nothing, unless its certificate
// expired (the node was off through the time to renew it: renew.go):
// then the node enrols again, under its name and role, with the
// credential it joined with.
func EnsureIdentity(ctx context.Context, dir string, role identity.Role, name string) error {
	ca, err := identity.LoadCAPublic(dir)
	if errors.Is(err, identity.ErrNoIdentity) {
		return nil
	}
	if err != nil {
		return err
	}
	if id, err := identity.Load(dir); !errors.Is(err, identity.ErrNoIdentity) {
		if err != nil || time.Now().Before(id.Cert.NotAfter) {
			return err
		}
		role, name = id.Cert.Role, id.Cert.Name
	}
	if local, err := identity.LoadCA(dir); err == nil {
		return issueLocally(dir, local, role, name)
	}
	_, cred, err := readEnrollFile(dir)
	if err != nil {
		return err
	}
	info, secret, err := ReadInfo(dir)
	if err != nil {
		return err
	}
	pub, priv, err := identity.NewKey()
	if err != nil {
		return err
	}
	mc, mclose, err := dialMgmt(info, secret, creds{ca: ca})
	if err != nil {
		return fmt.Errorf("cluster: enrol %s %q: reach the management service at %s: %w", role, name, info.Mgmt, err)
	}
	defer mclose()
	raw, err := mc.Enroll(ctx, mgmt.EnrollArgs{Name: name, Role: role.String(), Key: pub, Credential: cred})
	if err != nil {
		return fmt.Errorf("cluster: enrol %s %q: %w", role, name, err)
	}
	cert, err := identity.Decode(raw)
	if err == nil {
		err = (&identity.Trust{CA: ca, Roles: []identity.Role{role}}).Verify(cert)
	}
	if err == nil && !cert.Key.Equal(pub) {
		err = errors.New("the certificate names another key")
	}
	if err != nil {
		return fmt.Errorf("cluster: enrol %s %q: bad certificate from the management service: %w", role, name, err)
	}
	return (&identity.Identity{Cert: cert, Key: priv}).Save(dir)
}

// clientRole is the role a machine's commands and mounts enrol with: a
// client token's machine is a client; a server token's administers the
// cluster (role mgmt).
func clientRole(dir string) identity.Role {
	if class, _, err := readEnrollFile(dir); err == nil && class == classClient {
		return identity.RoleClient
	}
	return identity.RoleMgmt
}

// ensureClientIdentity is EnsureIdentity for a machine's commands and
// mounts, named by the host name.
func ensureClientIdentity(ctx context.Context, dir string) error {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "client"
	}
	return EnsureIdentity(ctx, dir, clientRole(dir), host)
}

// enrollHandler serves mgmt.Enroll: it signs the public key it is sent
// with ca (nil: this management service holds no CA key) if the
// credential enrols the role asked for (a client credential enrols
// clients only).
func enrollHandler(ca *identity.CA, serverCred, clientCred []byte, lifetime time.Duration) rpc.HandlerFunc {
	return func(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
		var a mgmt.EnrollArgs
		if err := json.Unmarshal(req.Args, &a); err != nil {
			return nil, fmt.Errorf("%w: enrol: %v", rpc.ErrForbidden, err)
		}
		if ca == nil {
			return nil, fmt.Errorf("%w: this management service holds no cluster CA key: enrol while the first host's leads", rpc.ErrForbidden)
		}
		role, err := identity.ParseRole(a.Role)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", rpc.ErrForbidden, err)
		}
		switch {
		case len(serverCred) == enrollLen && subtle.ConstantTimeCompare(a.Credential, serverCred) == 1:
		case len(clientCred) == enrollLen && subtle.ConstantTimeCompare(a.Credential, clientCred) == 1:
			if role != identity.RoleClient {
				return nil, fmt.Errorf("%w: a client token enrols clients only, not a %s: join with the server token (`poolfs cluster token`)", rpc.ErrForbidden, role)
			}
		default:
			return nil, fmt.Errorf("%w: wrong enrolment credential", rpc.ErrForbidden)
		}
		cert, err := ca.Issue(a.Name, role, randomSerial(), time.Now().Add(lifetime), ed25519.PublicKey(a.Key))
		if err != nil {
			return nil, fmt.Errorf("%w: %v", rpc.ErrForbidden, err)
		}
		return &rpc.Response{Result: cert.Encoded()}, nil
	}
}

// adminMethods change the map or the cluster's settings: only role mgmt
// (the management services and the machines that joined with the server
// token to administer the cluster) may call them.
var adminMethods = map[string]bool{
	"mgmt.AddDrive": true, "mgmt.CreatePool": true, "mgmt.CreatePoolOfServers": true,
	"mgmt.FailDrive": true, "mgmt.ReplaceDrive": true, "mgmt.SetDownGrace": true,
	"mgmt.SetRebuildPriority": true, "mgmt.SetSmallFileThreshold": true,
	"mgmt.Rebuild": true, "mgmt.Scrub": true, "mgmt.GC": true,
	"mgmt.AlertAck": true, "mgmt.AlertTest": true, "mgmt.Revoke": true,
}

// mgmtAuthorize is the management service's policy by the caller's role.
func mgmtAuthorize(method string, peer *identity.Cert) error {
	switch {
	case method == "mgmt.Revoke" && (peer == nil || peer.Role != identity.RoleMgmt):
		return fmt.Errorf("only administering machines revoke, not %s", peer)
	case peer == nil:
		if method != "mgmt.Enroll" {
			return errors.New("only enrolment is open to a node without a certificate")
		}
	case method == "mgmt.RegisterServer" && peer.Role != identity.RoleServer:
		return fmt.Errorf("only a server certificate registers drives, not %s", peer)
	case method == "mgmt.RegisterMeta" && peer.Role != identity.RoleMeta:
		return fmt.Errorf("only a meta certificate announces a metadata server, not %s", peer)
	case adminMethods[method] && peer.Role != identity.RoleMgmt:
		return fmt.Errorf("%s is for administering machines (joined with the server token), not %s", method, peer)
	}
	return nil
}

// mgmtIssuer returns the mgmt.Enroll and mgmt.Renew handlers of the
// management service of dir, issuing certificates of lifetime: they sign
// if dir holds the CA key (and, to enrol, the credentials: the first
// host's directory).
func mgmtIssuer(dir string, lifetime time.Duration) (enroll, renew rpc.HandlerFunc) {
	ca, err := identity.LoadCA(dir)
	if err != nil {
		return enrollHandler(nil, nil, nil, lifetime), renewHandler(nil, lifetime)
	}
	server, _ := readEnrollCredential(dir, classServer)
	client, _ := readEnrollCredential(dir, classClient)
	return enrollHandler(ca, server, client, lifetime), renewHandler(ca, lifetime)
}

// storageAuthorize is a storage server's policy by the caller's role:
// reconstructing stripes onto its drives and injecting faults are for the
// management service and administering machines (rebuild, fsck) and other
// servers, not clients; reading and writing fragments is for every node.
func storageAuthorize(method string, peer *identity.Cert) error {
	if (method == "storage.Reconstruct" || method == "storage.Fault") && (peer == nil || (peer.Role != identity.RoleMgmt && peer.Role != identity.RoleServer)) {
		return fmt.Errorf("%s is for management and storage servers, not %s", method, peer)
	}
	return nil
}
