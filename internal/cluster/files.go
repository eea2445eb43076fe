package cluster

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ErrNoCluster is returned when a directory holds no cluster.
var ErrNoCluster = errors.New("cluster: no cluster here (start one with `poolfs up`)")

// Info is the content of cluster.json.
type Info struct {
	Name string `json:"name"`
	Mgmt string `json:"mgmt"` // management service address
	Meta string `json:"meta"` // metadata service address
	PID  int    `json:"pid,omitempty"`
	// Dir is the directory ReadInfo read (not stored): where the node's
	// identity is.
	Dir string `json:"-"`
}

// ReadInfo reads cluster.json and the secret from dir.
func ReadInfo(dir string) (Info, []byte, error) {
	var in Info
	b, err := os.ReadFile(filepath.Join(dir, "cluster.json"))
	if errors.Is(err, os.ErrNotExist) {
		return in, nil, fmt.Errorf("%w: %s", ErrNoCluster, dir)
	}
	if err != nil {
		return in, nil, err
	}
	if err := json.Unmarshal(b, &in); err != nil {
		return in, nil, fmt.Errorf("cluster: %s/cluster.json: %w", dir, err)
	}
	in.Dir = dir
	secret, err := readSecret(dir)
	return in, secret, err
}

func writeInfo(dir string, in Info) error {
	b, err := json.MarshalIndent(in, "", "  ")
	if err != nil {
		return err
	}
	return writePrivate(filepath.Join(dir, "cluster.json"), append(b, '\n'))
}

func readSecret(dir string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(dir, "secret"))
	if err != nil {
		return nil, fmt.Errorf("cluster: read secret: %w", err)
	}
	s, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(s) < 16 {
		return nil, fmt.Errorf("cluster: %s/secret is not a hex secret of at least 16 bytes", dir)
	}
	return s, nil
}

// loadOrCreateSecret returns the cluster secret, generating it on first start.
func loadOrCreateSecret(dir string) ([]byte, error) {
	if s, err := readSecret(dir); err == nil {
		return s, nil
	}
	s := make([]byte, 32)
	if _, err := rand.Read(s); err != nil {
		return nil, err
	}
	p := filepath.Join(dir, "secret")
	if _, err := os.Stat(p); err == nil {
		return nil, fmt.Errorf("cluster: %s exists but is unreadable or malformed; refusing to replace it", p)
	}
	if err := writePrivate(p, []byte(hex.EncodeToString(s)+"\n")); err != nil {
		return nil, err
	}
	return s, nil
}

// idFile holds the cluster id, made at the first start (and at the first
// start of a directory from before ids). It names the cluster to the
// stores it binds: a PostgreSQL database serves one cluster, the one
// whose id it was bound to.
const idFile = "cluster-id"

// ReadID returns the id of the cluster whose directory is dir.
func ReadID(dir string) (string, error) {
	p := filepath.Join(dir, idFile)
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("cluster: %s is missing: `poolfs up -c %s` makes it, or copy it from the cluster's directory", p, dir)
	}
	if err != nil {
		return "", fmt.Errorf("cluster: read cluster id: %w", err)
	}
	id := strings.TrimSpace(string(b))
	if _, err := hex.DecodeString(id); err != nil || len(id) != 32 {
		return "", fmt.Errorf("cluster: %s does not hold a cluster id (32 hex digits)", p)
	}
	return id, nil
}

// loadOrCreateID returns the cluster id, making it if dir has none.
func loadOrCreateID(dir string) (string, error) {
	p := filepath.Join(dir, idFile)
	if _, err := os.Stat(p); err == nil {
		return ReadID(dir)
	}
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	id := hex.EncodeToString(b)
	if err := writePrivate(p, []byte(id+"\n")); err != nil {
		return "", fmt.Errorf("cluster: write cluster id: %w", err)
	}
	return id, nil
}
