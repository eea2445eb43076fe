package identity

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// Role is what a node is allowed to be in the cluster.
type Role uint8

// The roles a certificate can name.
const (
	RoleServer Role = 1 + iota // storage server: registers drives, serves fragments
	RoleMgmt                   // management service
	RoleMeta                   // metadata service
	RoleClient                 // client mount or command-line tool
)

var roleNames = map[Role]string{RoleServer: "server", RoleMgmt: "mgmt", RoleMeta: "meta", RoleClient: "client"}

func (r Role) String() string {
	if n, ok := roleNames[r]; ok {
		return n
	}
	return fmt.Sprintf("role(%d)", uint8(r))
}

// ParseRole returns the role named s ("server", "mgmt", "meta", "client").
func ParseRole(s string) (Role, error) {
	for r, n := range roleNames {
		if n == s {
			return r, nil
		}
	}
	return 0, fmt.Errorf("identity: unknown role %q (want server, mgmt, meta or client)", s)
}

// Errors of Decode and Trust.Verify.
var (
	ErrBadCert   = errors.New("identity: malformed certificate")
	ErrUntrusted = errors.New("identity: certificate not signed by the cluster CA")
	ErrExpired   = errors.New("identity: certificate expired")
	ErrRevoked   = errors.New("identity: certificate revoked")
	ErrRole      = errors.New("identity: certificate of the wrong role")
)

const (
	certMagic = "PFC1"
	sigLabel  = "poolfs node certificate v1"
	// fixedLen is every byte of a certificate but the name.
	fixedLen = len(certMagic) + 1 + 8 + 8 + 1 + ed25519.PublicKeySize + ed25519.SignatureSize
	// MaxCertLen is the longest encoded certificate.
	MaxCertLen = fixedLen + 255
)

// Cert is a node certificate. Decode fills it from its encoding; only
// Trust.Verify says whether the CA signed it.
type Cert struct {
	Name     string
	Role     Role
	Serial   uint64
	NotAfter time.Time // whole seconds
	Key      ed25519.PublicKey

	raw []byte // the full encoding, signature last
}

// Encoded returns the certificate's encoding. The caller must not modify it.
func (c *Cert) Encoded() []byte { return c.raw }

func (c *Cert) String() string {
	return fmt.Sprintf("%s %q (serial %d, expires %s)", c.Role, c.Name, c.Serial, c.NotAfter.UTC().Format(time.RFC3339))
}

func checkName(name string) error {
	if len(name) == 0 || len(name) > 255 || !utf8.ValidString(name) {
		return fmt.Errorf("%w: node name of %d bytes (want 1..255 of UTF-8)", ErrBadCert, len(name))
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("%w: control character in node name", ErrBadCert)
		}
	}
	return nil
}

// Decode parses an encoded certificate without checking its signature.
// It fails with ErrBadCert on anything but the exact layout of doc.go.
func Decode(b []byte) (*Cert, error) {
	if len(b) < fixedLen || len(b) > MaxCertLen || string(b[:4]) != certMagic {
		return nil, fmt.Errorf("%w: %d bytes", ErrBadCert, len(b))
	}
	c := &Cert{Role: Role(b[4])}
	if _, ok := roleNames[c.Role]; !ok {
		return nil, fmt.Errorf("%w: unknown role %d", ErrBadCert, b[4])
	}
	c.Serial = binary.BigEndian.Uint64(b[5:])
	c.NotAfter = time.Unix(int64(binary.BigEndian.Uint64(b[13:])), 0)
	n := int(b[21])
	if len(b) != fixedLen+n {
		return nil, fmt.Errorf("%w: name length %d in %d bytes", ErrBadCert, n, len(b))
	}
	c.Name = string(b[22 : 22+n])
	if err := checkName(c.Name); err != nil {
		return nil, err
	}
	c.Key = ed25519.PublicKey(append([]byte(nil), b[22+n:22+n+ed25519.PublicKeySize]...))
	c.raw = append([]byte(nil), b...)
	return c, nil
}

// signed returns the bytes the CA signs.
func (c *Cert) signed() []byte { return c.raw[:len(c.raw)-ed25519.SignatureSize] }

func (c *Cert) signature() []byte { return c.raw[len(c.raw)-ed25519.SignatureSize:] }

func sigMessage(body []byte) []byte { return append([]byte(sigLabel), body...) }

// CA signs node certificates. Its private key never leaves it.
type CA struct {
	key ed25519.PrivateKey
}

// NewCA makes a fresh CA key pair.
func NewCA() (*CA, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("identity: make CA key: %w", err)
	}
	return &CA{key: priv}, nil
}

// Public returns the CA's public key, which peers verify certificates with.
func (ca *CA) Public() ed25519.PublicKey { return ca.key.Public().(ed25519.PublicKey) }

// Issue signs a certificate naming name and role for the node key pub,
// valid until notAfter.
func (ca *CA) Issue(name string, role Role, serial uint64, notAfter time.Time, pub ed25519.PublicKey) (*Cert, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	if _, ok := roleNames[role]; !ok {
		return nil, fmt.Errorf("identity: unknown role %d", role)
	}
	if len(pub) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("identity: node public key of %d bytes", len(pub))
	}
	b := make([]byte, 0, fixedLen+len(name))
	b = append(b, certMagic...)
	b = append(b, byte(role))
	b = binary.BigEndian.AppendUint64(b, serial)
	b = binary.BigEndian.AppendUint64(b, uint64(notAfter.Unix()))
	b = append(b, byte(len(name)))
	b = append(b, name...)
	b = append(b, pub...)
	b = append(b, ed25519.Sign(ca.key, sigMessage(b))...)
	return Decode(b)
}

// Trust is what a peer checks a certificate against. The zero value of
// the optional fields accepts any role, revokes nothing and uses the
// clock.
type Trust struct {
	CA ed25519.PublicKey // the cluster CA's public key (required)
	// Roles are the roles accepted; empty: any.
	Roles []Role
	// Revoked, if set, reports whether c was revoked. It must be safe for
	// concurrent use and must not block for long (it runs in handshakes).
	Revoked func(c *Cert) bool
	// Now is the clock expiry is checked against; default time.Now.
	Now func() time.Time
}

// Verify checks that c was signed by t.CA and is unexpired, of an
// accepted role and not revoked. Errors wrap ErrUntrusted, ErrExpired,
// ErrRole or ErrRevoked and name the certificate.
func (t *Trust) Verify(c *Cert) error {
	if len(t.CA) != ed25519.PublicKeySize || !ed25519.Verify(t.CA, sigMessage(c.signed()), c.signature()) {
		return fmt.Errorf("%w: %s", ErrUntrusted, c)
	}
	if len(t.Roles) > 0 && !roleIn(c.Role, t.Roles) {
		return fmt.Errorf("%w: %s, want %v", ErrRole, c, t.Roles)
	}
	return t.Recheck(c)
}

// Recheck reports whether c, which Verify accepted earlier (at a
// connection's handshake), is still accepted now: unexpired and not
// revoked. It does not check the signature again, so it is cheap enough
// to run before every call on a connection. Errors wrap ErrExpired or
// ErrRevoked and name the certificate.
func (t *Trust) Recheck(c *Cert) error {
	now := time.Now
	if t.Now != nil {
		now = t.Now
	}
	if !now().Before(c.NotAfter) {
		return fmt.Errorf("%w: %s", ErrExpired, c)
	}
	if t.Revoked != nil && t.Revoked(c) {
		return fmt.Errorf("%w: %s", ErrRevoked, c)
	}
	return nil
}

func roleIn(r Role, rs []Role) bool {
	for _, x := range rs {
		if x == r {
			return true
		}
	}
	return false
}

// Identity is a node's certificate and the private key it names.
type Identity struct {
	Cert *Cert
	Key  ed25519.PrivateKey
}

// NewKey makes a fresh node key pair.
func NewKey() (ed25519.PublicKey, ed25519.PrivateKey, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("identity: make node key: %w", err)
	}
	return pub, priv, nil
}

// Sign signs msg with the identity's key.
func (id *Identity) Sign(msg []byte) []byte { return ed25519.Sign(id.Key, msg) }

// VerifySignature checks sig over msg by the key c names.
func (c *Cert) VerifySignature(msg, sig []byte) bool {
	return len(sig) == ed25519.SignatureSize && ed25519.Verify(c.Key, msg, sig)
}
