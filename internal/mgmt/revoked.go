package mgmt

import (
	"context"
	"fmt"
	"time"

	"poolfs/internal/meta"
)

// revokedBlob holds the revocation list: the names of the nodes whose
// certificates are refused (every process of the cluster reads it and
// checks it in every handshake, before every call and on its open
// connections: internal/cluster, internal/rpc), each with when it was
// revoked (RFC 3339).
const revokedBlob = "revoked-nodes"

// Revoke adds node to the revocation list. Revoking a name refuses every
// certificate of that name, past and future: a machine that comes back
// joins under a new name.
func (s *Service) Revoke(ctx context.Context, node string) error {
	if node == "" || len(node) > 255 {
		return fmt.Errorf("%w: node name of %d bytes", meta.ErrInvalid, len(node))
	}
	return setBlobMapEntry(ctx, s.store, revokedBlob, node, time.Now().UTC().Format(time.RFC3339), false)
}

// Revoked returns the revocation list: node name → when it was revoked.
func (s *Service) Revoked(ctx context.Context) (map[string]string, error) {
	m, _, err := loadBlobMap[string](ctx, s.store, revokedBlob)
	return m, err
}

// RegisterRevocation exposes Revoke and Revoked as mgmt.Revoke and
// mgmt.Revoked.
func (s *Service) RegisterRevocation(r Handler) {
	handleJSON(r, "mgmt.Revoke", func(ctx context.Context, node string) (any, error) {
		return nil, s.Revoke(ctx, node)
	})
	handleJSON(r, "mgmt.Revoked", func(ctx context.Context, _ struct{}) (any, error) {
		return s.Revoked(ctx)
	})
}

// Revoke adds node to the revocation list (Service.Revoke).
func (c *Client) Revoke(ctx context.Context, node string) error {
	return c.rc.Call(ctx, "mgmt.Revoke", node, nil, nil)
}

// Revoked returns the revocation list (Service.Revoked).
func (c *Client) Revoked(ctx context.Context) (map[string]string, error) {
	var m map[string]string
	err := c.rc.Call(ctx, "mgmt.Revoked", struct{}{}, nil, &m)
	return m, err
}
