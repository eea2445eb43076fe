package rpc

import (
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"io"
	"time"
)

// Handshake (see doc.go):
//
//	server → client: "PFS1" | serverNonce[32]
//	client → server: clientNonce[32] | HMAC(secret, "client"|serverNonce|clientNonce)
//	server → client: typeAuth frame, args = HMAC(secret, "server"|clientNonce|serverNonce)
//	             or: typeError frame, code "auth", then close
const (
	handshakeMagic   = "PFS1"
	nonceSize        = 32
	macSize          = sha256.Size
	serverHelloSize  = len(handshakeMagic) + nonceSize
	clientHelloSize  = nonceSize + macSize
	handshakeTimeout = 10 * time.Second

	// MinSecretLen is the shortest cluster secret accepted.
	MinSecretLen = 16
)

func checkSecret(secret []byte) error {
	if len(secret) < MinSecretLen {
		return fmt.Errorf("rpc: secret of %d bytes, need at least %d", len(secret), MinSecretLen)
	}
	return nil
}

func handshakeMAC(secret []byte, label string, a, b []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(label))
	m.Write(a)
	m.Write(b)
	return m.Sum(nil)
}

// parseServerHello returns the server nonce from a server hello.
func parseServerHello(b []byte) (nonce []byte, err error) {
	if len(b) != serverHelloSize || string(b[:len(handshakeMagic)]) != handshakeMagic {
		return nil, fmt.Errorf("%w: bad server hello (not a poolfs rpc server?)", ErrProtocol)
	}
	return b[len(handshakeMagic):], nil
}

// parseClientHello splits a client hello into nonce and MAC.
func parseClientHello(b []byte) (nonce, mac []byte, err error) {
	if len(b) != clientHelloSize {
		return nil, nil, fmt.Errorf("%w: bad client hello", ErrProtocol)
	}
	return b[:nonceSize], b[nonceSize:], nil
}

// serverHandshake authenticates the client on a fresh connection; nonce is
// the server's fresh random nonce. On a wrong MAC it sends an "auth" error
// frame and returns ErrAuth; the caller closes the connection.
func serverHandshake(r *frameReader, w io.Writer, secret, nonce []byte) error {
	hello := make([]byte, 0, serverHelloSize)
	hello = append(append(hello, handshakeMagic...), nonce...)
	if _, err := w.Write(hello); err != nil {
		return err
	}
	var msg [clientHelloSize]byte
	if _, err := io.ReadFull(r.br, msg[:]); err != nil {
		return err
	}
	clientNonce, mac, err := parseClientHello(msg[:])
	if err != nil {
		return err
	}
	fw := frameWriter{w: w}
	if !hmac.Equal(mac, handshakeMAC(secret, "client", nonce, clientNonce)) {
		// Best effort: the client learns why before we hang up.
		_ = fw.write(typeError, 0, codeAuth, []byte(ErrAuth.Error()), nil)
		return ErrAuth
	}
	return fw.write(typeAuth, 0, "", handshakeMAC(secret, "server", clientNonce, nonce), nil)
}

// clientHandshake authenticates the server; nonce is the client's fresh
// random nonce. It returns ErrAuth if either side rejects the other.
func clientHandshake(r *frameReader, w io.Writer, secret, nonce []byte) error {
	var msg [serverHelloSize]byte
	if _, err := io.ReadFull(r.br, msg[:]); err != nil {
		return err
	}
	serverNonce, err := parseServerHello(msg[:])
	if err != nil {
		return err
	}
	reply := make([]byte, 0, clientHelloSize)
	reply = append(append(reply, nonce...), handshakeMAC(secret, "client", serverNonce, nonce)...)
	if _, err := w.Write(reply); err != nil {
		return err
	}
	h, err := r.readHeader()
	if err != nil {
		return err
	}
	if h.bodyLen != 0 || h.argsLen > 1024 || h.id != 0 {
		return fmt.Errorf("%w: bad handshake verdict frame", ErrProtocol)
	}
	name, args, err := r.readMeta(h)
	if err != nil {
		return err
	}
	switch {
	case h.typ == typeError && string(name) == codeAuth:
		return ErrAuth
	case h.typ != typeAuth || len(name) != 0 || len(args) != macSize:
		return fmt.Errorf("%w: bad handshake verdict frame", ErrProtocol)
	case !hmac.Equal(args, handshakeMAC(secret, "server", nonce, serverNonce)):
		return fmt.Errorf("%w: server does not know the secret", ErrAuth)
	}
	return nil
}
