package identity

import (
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"poolfs/internal/privfile"
)

// File names in a node's directory. Every one is written with mode 0600.
const (
	CAKeyFile    = "ca.key"    // the CA's private key (first host only)
	CAPubFile    = "ca.pub"    // the CA's public key (every node)
	NodeKeyFile  = "node.key"  // this node's private key
	NodeCertFile = "node.cert" // this node's certificate
)

// ErrNoIdentity is returned when a directory holds no CA or no identity.
var ErrNoIdentity = errors.New("identity: none here")

// writePrivate writes b to path, 0600, atomically (privfile.Write).
func writePrivate(path string, b []byte) error {
	if err := privfile.Write(path, b); err != nil {
		return fmt.Errorf("identity: %w", err)
	}
	return nil
}

// readHex reads a file of one hex string of n bytes (any n if n == 0).
// Its errors never hold the contents.
func readHex(path string, n int) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s is missing", ErrNoIdentity, path)
	}
	if err != nil {
		return nil, fmt.Errorf("identity: read %s: %w", path, err)
	}
	v, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || (n != 0 && len(v) != n) {
		return nil, fmt.Errorf("identity: %s does not hold what poolfs wrote there", path)
	}
	return v, nil
}

func writeHex(path string, b []byte) error {
	return writePrivate(path, []byte(hex.EncodeToString(b)+"\n"))
}

// SaveCA writes the CA's private and public keys into dir.
func (ca *CA) Save(dir string) error {
	if err := writeHex(filepath.Join(dir, CAKeyFile), ca.key.Seed()); err != nil {
		return err
	}
	return writeHex(filepath.Join(dir, CAPubFile), ca.Public())
}

// LoadCA reads the CA that Save wrote into dir. It fails with
// ErrNoIdentity if dir holds no CA private key.
func LoadCA(dir string) (*CA, error) {
	seed, err := readHex(filepath.Join(dir, CAKeyFile), ed25519.SeedSize)
	if err != nil {
		return nil, err
	}
	return &CA{key: ed25519.NewKeyFromSeed(seed)}, nil
}

// SaveCAPublic writes only the CA's public key into dir (a node that
// joins the cluster).
func SaveCAPublic(dir string, pub ed25519.PublicKey) error {
	return writeHex(filepath.Join(dir, CAPubFile), pub)
}

// LoadCAPublic reads the CA public key in dir.
func LoadCAPublic(dir string) (ed25519.PublicKey, error) {
	b, err := readHex(filepath.Join(dir, CAPubFile), ed25519.PublicKeySize)
	return ed25519.PublicKey(b), err
}

// Save writes the identity's key and certificate into dir.
func (id *Identity) Save(dir string) error {
	if err := writeHex(filepath.Join(dir, NodeKeyFile), id.Key.Seed()); err != nil {
		return err
	}
	return writeHex(filepath.Join(dir, NodeCertFile), id.Cert.Encoded())
}

// Load reads the identity Save wrote into dir and checks that the key is
// the one the certificate names. It fails with ErrNoIdentity if dir
// holds none.
func Load(dir string) (*Identity, error) {
	seed, err := readHex(filepath.Join(dir, NodeKeyFile), ed25519.SeedSize)
	if err != nil {
		return nil, err
	}
	raw, err := readHex(filepath.Join(dir, NodeCertFile), 0)
	if err != nil {
		return nil, err
	}
	c, err := Decode(raw)
	if err != nil {
		return nil, fmt.Errorf("identity: %s: %w", filepath.Join(dir, NodeCertFile), err)
	}
	id := &Identity{Cert: c, Key: ed25519.NewKeyFromSeed(seed)}
	if !id.Key.Public().(ed25519.PublicKey).Equal(c.Key) {
		return nil, fmt.Errorf("identity: %s and %s do not belong together", NodeKeyFile, NodeCertFile)
	}
	return id, nil
}
