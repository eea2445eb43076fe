package mgmt

import "context"

// EnrollArgs asks the management service for a node certificate
// (internal/cluster signs it with the cluster CA): the node's name and
// role, its freshly made Ed25519 public key (the private key never leaves
// the node) and the enrolment credential of its join token.
type EnrollArgs struct {
	Name       string
	Role       string // server, mgmt, meta or client
	Key        []byte
	Credential []byte
}

// Enroll returns the encoded certificate the management service issued
// for a.
func (c *Client) Enroll(ctx context.Context, a EnrollArgs) ([]byte, error) {
	var cert []byte
	err := c.rc.Call(ctx, "mgmt.Enroll", a, nil, &cert)
	return cert, err
}

// Renew asks the leading management service for a fresh certificate of
// this node's name, role and key (the certificate this connection
// proved). It returns nil if the certificate is not due for renewal yet
// (internal/cluster decides, and signs).
func (c *Client) Renew(ctx context.Context) ([]byte, error) {
	var cert []byte
	err := c.rc.Call(ctx, "mgmt.Renew", struct{}{}, nil, &cert)
	return cert, err
}
