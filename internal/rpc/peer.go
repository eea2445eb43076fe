package rpc

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"

	"poolfs/internal/identity"
)

// Identity exchange (see doc.go). Right after the handshake, in records:
//
//	server → client: typeAuth frame, args = serverCert | Sign(serverKey, idLabelServer|transcript), or empty
//	client → server: typeAuth frame, args = clientCert | Sign(clientKey, idLabelClient|transcript), or empty
//	server → client: typeAuth frame with empty args (accepted),
//	             or: typeError frame, code "auth", the reason, then close
//
// A side that trusts a CA (Peers set) requires the other's certificate,
// checks it with identity.Trust.Verify and checks the signature over the
// transcript (both nonces and both ephemeral keys), so a certificate is
// proved by its key on this very connection and cannot be replayed on
// another. A side without Peers ignores what the other presents.
const (
	idLabelServer = "poolfs rpc v3 server identity"
	idLabelClient = "poolfs rpc v3 client identity"
	// maxIdentityArgs bounds an identity frame's args.
	maxIdentityArgs = identity.MaxCertLen + ed25519.SignatureSize
)

// identityArgs returns the args of the identity frame of id (none if nil).
func identityArgs(id *identity.Identity, label string, transcript []byte) []byte {
	if id == nil {
		return nil
	}
	sig := id.Sign(append([]byte(label), transcript...))
	return append(append([]byte(nil), id.Cert.Encoded()...), sig...)
}

// checkPeer verifies the peer's identity frame args against trust. It
// returns the peer's certificate, or nil if trust is nil (nothing is
// trusted, so nothing is returned). Errors wrap ErrAuth.
func checkPeer(args []byte, label string, transcript []byte, trust *identity.Trust) (*identity.Cert, error) {
	if trust == nil {
		return nil, nil
	}
	if len(args) == 0 {
		return nil, fmt.Errorf("%w: peer presented no certificate", ErrAuth)
	}
	if len(args) < ed25519.SignatureSize {
		return nil, fmt.Errorf("%w: %w: identity of %d bytes", ErrAuth, identity.ErrBadCert, len(args))
	}
	certBytes, sig := args[:len(args)-ed25519.SignatureSize], args[len(args)-ed25519.SignatureSize:]
	c, err := identity.Decode(certBytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrAuth, err)
	}
	if err := trust.Verify(c); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrAuth, err)
	}
	if !c.VerifySignature(append([]byte(label), transcript...), sig) {
		return nil, fmt.Errorf("%w: %s did not prove its key on this connection", ErrAuth, c)
	}
	return c, nil
}

// readIdentityFrame reads one identity or verdict frame of the exchange.
func readIdentityFrame(fr *frameReader) (h header, name, args []byte, err error) {
	h, err = fr.readHeader()
	if err != nil {
		return h, nil, nil, err
	}
	if (h.typ != typeAuth && h.typ != typeError) || h.id != 0 || h.bodyLen != 0 || h.argsLen > maxIdentityArgs {
		return h, nil, nil, fmt.Errorf("%w: bad identity frame", ErrProtocol)
	}
	name, args, err = fr.readMeta(h)
	return h, name, args, err
}

// serverIdentity runs the server's side of the exchange on an
// authenticated connection and returns the client's verified certificate
// (nil if the server trusts no CA).
func (s *Server) serverIdentity(fr *frameReader, fw *frameWriter, transcript []byte) (*identity.Cert, error) {
	if err := fw.write(typeAuth, 0, "", identityArgs(s.identity.Get(), idLabelServer, transcript), nil); err != nil {
		return nil, err
	}
	h, _, args, err := readIdentityFrame(fr)
	if err == nil && h.typ != typeAuth {
		err = fmt.Errorf("%w: client sent an error frame for its identity", ErrProtocol)
	}
	if err != nil {
		return nil, err
	}
	trust := s.peers
	if len(args) == 0 && s.noCertOK {
		trust = nil // admitted with no peer (ServerOptions.AllowNoCert)
	}
	peer, err := checkPeer(args, idLabelClient, transcript, trust)
	if err != nil {
		// Best effort: the client learns why before we hang up.
		_ = fw.write(typeError, 0, codeAuth, []byte(err.Error()), nil)
		return nil, err
	}
	return peer, fw.write(typeAuth, 0, "", nil, nil)
}

// clientIdentity runs the client's side of the exchange, presenting own,
// and returns the server's verified certificate (nil if the client
// trusts no CA).
func (c *Client) clientIdentity(fr *frameReader, fw *frameWriter, transcript []byte, own *identity.Identity) (*identity.Cert, error) {
	h, _, args, err := readIdentityFrame(fr)
	if err == nil && h.typ != typeAuth {
		err = fmt.Errorf("%w: server sent an error frame for its identity", ErrProtocol)
	}
	if err != nil {
		return nil, err
	}
	peer, err := checkPeer(args, idLabelServer, transcript, c.peers)
	if errors.Is(err, identity.ErrRevoked) || errors.Is(err, identity.ErrExpired) {
		// Out of the cluster, as good as down: callers go around it.
		return nil, fmt.Errorf("%w: server %s: %w", ErrUnavailable, c.addr, err)
	}
	if err != nil {
		return nil, fmt.Errorf("server %s: %w", c.addr, err)
	}
	if err := fw.write(typeAuth, 0, "", identityArgs(own, idLabelClient, transcript), nil); err != nil {
		return nil, err
	}
	h, name, args, err := readIdentityFrame(fr)
	switch {
	case err != nil:
		return nil, err
	case h.typ == typeError && string(name) == codeAuth:
		return nil, fmt.Errorf("%w: server refused this client: %q", ErrAuth, args)
	case h.typ != typeAuth || len(name) != 0 || len(args) != 0:
		return nil, fmt.Errorf("%w: bad identity verdict frame", ErrProtocol)
	}
	return peer, nil
}

type peerKey struct{}

// PeerFrom returns the verified certificate of the client whose call a
// handler's ctx belongs to, or nil if the server trusts no CA
// (ServerOptions.Peers unset) or ctx is not a handler's.
func PeerFrom(ctx context.Context) *identity.Cert {
	c, _ := ctx.Value(peerKey{}).(*identity.Cert)
	return c
}
