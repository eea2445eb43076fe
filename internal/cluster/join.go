package cluster

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"poolfs/internal/identity"
)

// tokenPrefix starts every join token; the version after it changes if the
// token's contents do.
const tokenPrefix = "poolfs-join-2:"

// ErrBadToken is returned for a join token that cannot be read.
var ErrBadToken = errors.New("cluster: bad join token")

// Token is what a machine needs to join a cluster: the management
// service's address, the cluster id, the cluster secret, the cluster CA's
// public key (to verify every other node) and an enrolment credential
// for its Class: a "server" token enrols storage servers, metadata and
// management services and administering machines; a "client" token
// enrols clients only (identity.go). Whoever holds a token holds the
// secret (docs/rpc-security.md): hand it over as a password, never log it.
type Token struct {
	Mgmt   string `json:"mgmt"`   // host:port of the management service; several: comma-separated
	ID     string `json:"id"`     // cluster id, 32 hex digits
	Secret []byte `json:"secret"` // the cluster secret, at least 16 bytes
	CA     []byte `json:"ca"`     // the cluster CA's Ed25519 public key
	Class  string `json:"class"`  // "server" or "client": what the credential enrols
	Enroll []byte `json:"enroll"` // the enrolment credential of Class
}

// String encodes the token as one shell-safe word.
func (t Token) String() string {
	b, _ := json.Marshal(t)
	return tokenPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// Validate rejects a token that cannot join anything.
func (t Token) Validate() error {
	if err := checkMgmtAddrs(t.Mgmt); err != nil {
		return fmt.Errorf("%w: %v", ErrBadToken, err)
	}
	if _, err := hex.DecodeString(t.ID); err != nil || len(t.ID) != 32 {
		return fmt.Errorf("%w: cluster id is not 32 hex digits", ErrBadToken)
	}
	if len(t.Secret) < 16 || len(t.Secret) > 1024 {
		return fmt.Errorf("%w: secret of %d bytes", ErrBadToken, len(t.Secret))
	}
	if len(t.CA) != ed25519.PublicKeySize {
		return fmt.Errorf("%w: CA key of %d bytes", ErrBadToken, len(t.CA))
	}
	if (t.Class != classServer && t.Class != classClient) || len(t.Enroll) != enrollLen {
		return fmt.Errorf("%w: enrolment credential of class %q and %d bytes", ErrBadToken, t.Class, len(t.Enroll))
	}
	return nil
}

// ParseToken decodes a token made by Token.String. Its errors never hold
// the secret.
func ParseToken(s string) (Token, error) {
	var t Token
	rest, ok := strings.CutPrefix(strings.TrimSpace(s), tokenPrefix)
	if !ok {
		return t, fmt.Errorf("%w: it does not start with %q (made by `poolfs cluster create` or `poolfs cluster token` of this release)", ErrBadToken, tokenPrefix)
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil {
		return t, fmt.Errorf("%w: not base64", ErrBadToken)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil {
		return Token{}, fmt.Errorf("%w: not a token", ErrBadToken)
	}
	if err := t.Validate(); err != nil {
		return Token{}, err
	}
	return t, nil
}

// Create makes the directory of a new cluster whose management service
// will listen on mgmtAddr (host:port that every other machine can reach):
// its secret, its id, cluster.json, the cluster CA, this machine's
// identity (role mgmt) and the enrolment credentials. It returns the join
// token of class server. It refuses a directory that holds a cluster
// already.
func Create(dir, name, mgmtAddr string) (Token, error) {
	if _, err := os.Stat(filepath.Join(dir, idFile)); err == nil {
		return Token{}, fmt.Errorf("cluster: %s holds a cluster already (`poolfs cluster token -c %s` prints its join token)", dir, dir)
	}
	if err := checkMgmtAddrs(mgmtAddr); err != nil {
		return Token{}, fmt.Errorf("%w: %v", ErrBadToken, err)
	}
	if err := makePrivateDir(dir); err != nil {
		return Token{}, err
	}
	if _, err := loadOrCreateSecret(dir); err != nil {
		return Token{}, err
	}
	if _, err := loadOrCreateID(dir); err != nil {
		return Token{}, err
	}
	if name == "" {
		name = filepath.Base(mustAbs(dir))
	}
	if err := createCA(dir, "mgmt@"+MgmtAddrs(mgmtAddr)[0]); err != nil {
		return Token{}, err
	}
	if err := writeInfo(dir, Info{Name: name, Mgmt: mgmtAddr}); err != nil {
		return Token{}, err
	}
	return ReadToken(dir, classServer)
}

// ReadToken returns the join token of class ("server" or "client") of the
// cluster whose directory is dir, the first host's (which holds the
// enrolment credentials).
func ReadToken(dir, class string) (Token, error) {
	info, secret, err := ReadInfo(dir)
	if err != nil {
		return Token{}, err
	}
	id, err := ReadID(dir)
	if err != nil {
		return Token{}, err
	}
	ca, err := identity.LoadCAPublic(dir)
	if err != nil {
		return Token{}, fmt.Errorf("cluster: %s holds no cluster CA (made before node identities?): %w", dir, err)
	}
	cred, err := readEnrollCredential(dir, class)
	if err != nil {
		return Token{}, err
	}
	t := Token{Mgmt: info.Mgmt, ID: id, Secret: secret, CA: ca, Class: class, Enroll: cred}
	return t, t.Validate()
}

// Join makes dir the directory of a machine of the cluster of t: it
// writes the secret, the id, cluster.json (the management address), the
// CA's public key and the enrolment credential. The node's own key and
// certificate are made when its first service starts (EnsureIdentity). A
// directory of the same cluster is updated; one of another cluster is
// refused.
func Join(dir string, t Token) error {
	if err := t.Validate(); err != nil {
		return err
	}
	if err := makePrivateDir(dir); err != nil {
		return err
	}
	if id, err := ReadID(dir); err == nil && id != t.ID {
		return fmt.Errorf("cluster: %s belongs to cluster %s, the token to cluster %s: use another directory", dir, id, t.ID)
	}
	if s, err := readSecret(dir); err == nil && !bytes.Equal(s, t.Secret) {
		return fmt.Errorf("cluster: %s holds another secret than the token's: remove %s if the cluster's secret was changed",
			dir, filepath.Join(dir, "secret"))
	}
	if err := writePrivate(filepath.Join(dir, "secret"), []byte(hex.EncodeToString(t.Secret)+"\n")); err != nil {
		return err
	}
	if err := writePrivate(filepath.Join(dir, idFile), []byte(t.ID+"\n")); err != nil {
		return err
	}
	if ca, err := identity.LoadCAPublic(dir); err == nil && !ca.Equal(ed25519.PublicKey(t.CA)) {
		return fmt.Errorf("cluster: %s trusts another cluster CA than the token's", dir)
	}
	if err := identity.SaveCAPublic(dir, t.CA); err != nil {
		return err
	}
	if err := writeEnrollFile(dir, t.Class, t.Enroll); err != nil {
		return err
	}
	info, _, err := ReadInfo(dir)
	if err != nil {
		info = Info{}
	}
	info.Mgmt = t.Mgmt
	return writeInfo(dir, info)
}
