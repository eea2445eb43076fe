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
