package rpc

import (
	"crypto/ecdh"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"io"
	"time"
)

// Handshake (see doc.go), in clear; every byte after it is in records:
//
//	server → client: "PFS3" | serverNonce[32]
//	client → server: clientNonce[32] | clientPub[32] | HMAC(secret, "poolfs rpc v3 client"|serverNonce|clientNonce|clientPub)
//	server → client: typeAuth frame, args = serverPub[32] | HMAC(secret, "poolfs rpc v3 server"|clientNonce|serverNonce|clientPub|serverPub)
//	             or: typeError frame, code "auth" or "busy", then close
//
// clientPub and serverPub are ephemeral X25519 keys; the record keys come
// from the secret and their shared secret (record.go). Both functions
// also return the transcript, serverNonce | clientNonce | clientPub |
// serverPub, which each side then signs with its identity (peer.go). The server holds no
// buffer for a connection, and makes no key, until the client's MAC is
// checked: the hello is read into a fixed array straight from the socket.
const (
	handshakePrefix  = "PFS"
	protocolVersion  = '3'
	nonceSize        = 32
	macSize          = sha256.Size
	serverHelloSize  = len(handshakePrefix) + 1 + nonceSize
	pubSize          = 32 // X25519 public key
	clientHelloSize  = nonceSize + pubSize + macSize
	handshakeTimeout = 10 * time.Second // client side; the server's is ServerOptions.HandshakeTimeout

	macLabelClient = "poolfs rpc v3 client"
	macLabelServer = "poolfs rpc v3 server"
	// maxVerdictArgs bounds the args of the verdict frame (a MAC or a short
	// refusal message).
	maxVerdictArgs = 1024

	// MinSecretLen is the shortest cluster secret accepted.
	MinSecretLen = 16
)

func checkSecret(secret []byte) error {
	if len(secret) < MinSecretLen {
		return fmt.Errorf("rpc: secret of %d bytes, need at least %d", len(secret), MinSecretLen)
	}
	return nil
}

func handshakeMAC(secret []byte, label string, parts ...[]byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(label))
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

// newEphemeralKey returns a fresh X25519 key for one handshake.
func newEphemeralKey() (*ecdh.PrivateKey, error) {
	return ecdh.X25519().GenerateKey(rand.Reader)
}

// sharedSecret is the X25519 shared secret of own and the peer's public
// key. A peer key of low order is a protocol error.
func sharedSecret(own *ecdh.PrivateKey, peerPub []byte) ([]byte, error) {
	pub, err := ecdh.X25519().NewPublicKey(peerPub)
	if err == nil {
		var shared []byte
		if shared, err = own.ECDH(pub); err == nil {
			return shared, nil
		}
	}
	return nil, fmt.Errorf("%w: bad ephemeral key from peer: %v", ErrProtocol, err)
}

// parseServerHello returns the server nonce from a server hello. A poolfs
// server of another protocol version gets an error naming both versions.
func parseServerHello(b []byte) (nonce []byte, err error) {
	if len(b) != serverHelloSize || string(b[:len(handshakePrefix)]) != handshakePrefix {
		return nil, fmt.Errorf("%w: bad server hello (not a poolfs rpc server?)", ErrProtocol)
	}
	if v := b[len(handshakePrefix)]; v != protocolVersion {
		return nil, fmt.Errorf("%w: server speaks rpc protocol version %q, this client speaks %q: run the same poolfs release on every machine",
			ErrProtocol, v, protocolVersion)
	}
	return b[len(handshakePrefix)+1:], nil
}

// plainFrame encodes a handshake verdict frame (in clear, id 0, no body).
func plainFrame(typ frameType, name string, args []byte) []byte {
	b := make([]byte, headerSize, headerSize+len(name)+len(args))
	putHeader(b, header{typ: typ, nameLen: len(name), argsLen: len(args)})
	return append(append(b, name...), args...)
}

// readVerdict reads the server's verdict frame, of at most a few hundred
// bytes, checking its header before reading the rest.
func readVerdict(r io.Reader) (h header, name, args []byte, err error) {
	var hdr [headerSize]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return header{}, nil, nil, err
	}
	h, err = parseHeader(hdr[:], 0)
	if err != nil {
		return header{}, nil, nil, err
	}
	if h.bodyLen != 0 || h.argsLen > maxVerdictArgs || h.id != 0 {
		return header{}, nil, nil, fmt.Errorf("%w: bad handshake verdict frame", ErrProtocol)
	}
	buf := make([]byte, h.nameLen+h.argsLen)
	if _, err := io.ReadFull(r, buf); err != nil {
		return header{}, nil, nil, unexpectedEOF(err)
	}
	return h, buf[:h.nameLen], buf[h.nameLen:], nil
}

// serverHandshake authenticates the client on a fresh connection; nonce is
// the server's fresh random nonce. Once the client's MAC is right, admit
// decides whether the connection may stay (nil) or is refused (the error's
// text goes to the client in a "busy" frame). It returns the ciphers of
// both directions. On a wrong MAC it sends an "auth" error frame and
// returns ErrAuth. On any error the caller closes the connection.
func serverHandshake(rw io.ReadWriter, secret, nonce []byte, admit func() error) (c2s, s2c cipherState, transcript []byte, err error) {
	var hello [serverHelloSize]byte
	copy(hello[:], handshakePrefix)
	hello[len(handshakePrefix)] = protocolVersion
	copy(hello[len(handshakePrefix)+1:], nonce)
	if _, err := rw.Write(hello[:]); err != nil {
		return c2s, s2c, nil, err
	}
	var msg [clientHelloSize]byte
	if _, err := io.ReadFull(rw, msg[:]); err != nil {
		return c2s, s2c, nil, err
	}
	clientNonce, clientPub, mac := msg[:nonceSize], msg[nonceSize:nonceSize+pubSize], msg[nonceSize+pubSize:]
	if !hmac.Equal(mac, handshakeMAC(secret, macLabelClient, nonce, clientNonce, clientPub)) {
		// Best effort: the client learns why before we hang up.
		_, _ = rw.Write(plainFrame(typeError, codeAuth, []byte(ErrAuth.Error())))
		return c2s, s2c, nil, ErrAuth
	}
	if err := admit(); err != nil {
		_, _ = rw.Write(plainFrame(typeError, codeBusy, []byte(err.Error())))
		return c2s, s2c, nil, err
	}
	eph, err := newEphemeralKey()
	if err != nil {
		return c2s, s2c, nil, err
	}
	shared, err := sharedSecret(eph, clientPub)
	if err != nil {
		return c2s, s2c, nil, err
	}
	if c2s, s2c, err = sessionKeys(secret, shared, nonce, clientNonce); err != nil {
		return c2s, s2c, nil, err
	}
	serverPub := eph.PublicKey().Bytes()
	verdict := append(serverPub, handshakeMAC(secret, macLabelServer, clientNonce, nonce, clientPub, serverPub)...)
	if _, err = rw.Write(plainFrame(typeAuth, "", verdict)); err != nil {
		return c2s, s2c, nil, err
	}
	return c2s, s2c, handshakeTranscript(nonce, clientNonce, clientPub, serverPub), nil
}

// clientHandshake authenticates the server; nonce is the client's fresh
// random nonce and eph its fresh ephemeral key. It returns the ciphers of
// both directions, or ErrAuth if either side rejects the other, or
// ErrUnavailable if the server refuses the connection for now (at its
// connection limit).
func clientHandshake(r io.Reader, w io.Writer, secret, nonce []byte, eph *ecdh.PrivateKey) (c2s, s2c cipherState, transcript []byte, err error) {
	var msg [serverHelloSize]byte
	if _, err := io.ReadFull(r, msg[:]); err != nil {
		return c2s, s2c, nil, err
	}
	serverNonce, err := parseServerHello(msg[:])
	if err != nil {
		return c2s, s2c, nil, err
	}
	clientPub := eph.PublicKey().Bytes()
	reply := make([]byte, 0, clientHelloSize)
	reply = append(append(append(reply, nonce...), clientPub...), handshakeMAC(secret, macLabelClient, serverNonce, nonce, clientPub)...)
	if _, err := w.Write(reply); err != nil {
		return c2s, s2c, nil, err
	}
	h, name, args, err := readVerdict(r)
	if err != nil {
		return c2s, s2c, nil, err
	}
	switch {
	case h.typ == typeError && string(name) == codeAuth:
		return c2s, s2c, nil, ErrAuth
	case h.typ == typeError && string(name) == codeBusy:
		return c2s, s2c, nil, fmt.Errorf("%w: server refused the connection: %q", ErrUnavailable, args)
	case h.typ != typeAuth || len(name) != 0 || len(args) != pubSize+macSize:
		return c2s, s2c, nil, fmt.Errorf("%w: bad handshake verdict frame", ErrProtocol)
	}
	serverPub, mac := args[:pubSize], args[pubSize:]
	if !hmac.Equal(mac, handshakeMAC(secret, macLabelServer, nonce, serverNonce, clientPub, serverPub)) {
		return c2s, s2c, nil, fmt.Errorf("%w: server does not know the secret", ErrAuth)
	}
	shared, err := sharedSecret(eph, serverPub)
	if err != nil {
		return c2s, s2c, nil, err
	}
	if c2s, s2c, err = sessionKeys(secret, shared, serverNonce, nonce); err != nil {
		return c2s, s2c, nil, err
	}
	return c2s, s2c, handshakeTranscript(serverNonce, nonce, clientPub, serverPub), nil
}

// handshakeTranscript is what both sides sign with their identity keys:
// both nonces and both ephemeral keys of this connection.
func handshakeTranscript(serverNonce, clientNonce, clientPub, serverPub []byte) []byte {
	t := make([]byte, 0, 2*nonceSize+2*pubSize)
	return append(append(append(append(t, serverNonce...), clientNonce...), clientPub...), serverPub...)
}
