// Package identity holds poolfs's per-node identities: a cluster CA (an
// Ed25519 key pair), node certificates it signs, and the check a peer
// makes of a certificate (Trust.Verify).
//
// A certificate names one node and its role (server, mgmt, meta or
// client), carries the node's Ed25519 public key, a serial and an expiry,
// and the CA's signature over all of it. Its encoding is fixed and
// canonical, big-endian:
//
//	"PFC1" | role u8 | serial u64 | notAfter i64 (Unix seconds) |
//	name length u8 | name (1..255 bytes of UTF-8, no control characters) |
//	public key [32] | signature [64]
//
// where the signature is Ed25519(CA, "poolfs node certificate v1" |
// every byte before it). Decode accepts exactly this layout and nothing
// else (no trailing bytes), so a certificate has one encoding, and does
// not check the signature: Trust.Verify does, together with the expiry,
// the role and the revocation list. The rpc package uses these to make
// every connection present and prove a certificate (internal/rpc/doc.go).
//
// A node's identity in use is held in a Current, which renewal replaces
// while connections are being made with it.
//
// Private keys (the CA's and each node's) are written only with mode
// 0600 and never appear in errors, logs or String output.
package identity
