package rpc

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
)

// Record layer (see doc.go). After the handshake every byte on the wire
// belongs to a record: up to recordMax bytes of plaintext sealed with
// AES-256-GCM under the key of its direction, with the record's sequence
// number in that direction as the nonce, followed by the 16-byte tag. A
// frame is a header record (the fixed header, so its lengths are
// authenticated before anything is read or allocated for them), then its
// name and args as one section, then its body as another; a section of n
// bytes is cut into records of recordMax bytes and a last shorter one, and
// an empty section has no records. Both ends derive the record sizes from
// the authenticated header, so no length travels in clear.
const (
	tagSize = 16
	// sealedMax is the wire size of a full record: exactly one size class
	// of bufPool, so a record buffer wastes nothing.
	sealedMax        = 64 << 10
	recordMax        = sealedMax - tagSize
	sealedHeaderSize = headerSize + tagSize
	// writeBatch is how much sealed data a frameWriter gathers per write
	// system call.
	writeBatch = 4 * sealedMax

	keyInfoC2S = "poolfs rpc v3 client to server"
	keyInfoS2C = "poolfs rpc v3 server to client"
)

// sealedLen is the wire size of a section of n plaintext bytes.
func sealedLen(n int) int {
	return n + (n+recordMax-1)/recordMax*tagSize
}

// cipherState seals or opens the records of one direction of one
// connection. Each side holds two, one per direction, and each is used by
// one goroutine at a time.
type cipherState struct {
	aead  cipher.AEAD
	seq   uint64 // sequence number of the next record; never wraps in practice (2^64 records)
	nonce [12]byte
	from  string // "client" or "server": who seals, for error messages
}

// sessionKeys derives the two directions' ciphers of a connection from
// the cluster secret, the X25519 shared secret of the handshake's
// ephemeral keys and both nonces, so every connection has fresh keys, a
// frame of one connection or direction is never accepted on another, and
// recorded traffic stays sealed to whoever learns the cluster secret later.
func sessionKeys(secret, shared, serverNonce, clientNonce []byte) (c2s, s2c cipherState, err error) {
	ikm := make([]byte, 0, len(secret)+len(shared))
	ikm = append(append(ikm, secret...), shared...)
	salt := make([]byte, 0, 2*nonceSize)
	salt = append(append(salt, serverNonce...), clientNonce...)
	c2s, err = newCipherState(ikm, salt, keyInfoC2S, "client")
	if err == nil {
		s2c, err = newCipherState(ikm, salt, keyInfoS2C, "server")
	}
	return c2s, s2c, err
}

func newCipherState(ikm, salt []byte, info, from string) (cipherState, error) {
	key, err := hkdf.Key(sha256.New, ikm, salt, info, 32)
	if err != nil {
		return cipherState{}, fmt.Errorf("rpc: derive %s key: %w", from, err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return cipherState{}, fmt.Errorf("rpc: %s key: %w", from, err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return cipherState{}, fmt.Errorf("rpc: %s key: %w", from, err)
	}
	return cipherState{aead: aead, from: from}, nil
}

func (s *cipherState) nextNonce() []byte {
	binary.BigEndian.PutUint64(s.nonce[4:], s.seq)
	s.seq++
	return s.nonce[:]
}

// seal appends the record sealing plain to dst. dst's free capacity may
// be plain itself (dst = plain[:0] in effect), to seal in place.
func (s *cipherState) seal(dst, plain []byte) []byte {
	return s.aead.Seal(dst, s.nextNonce(), plain, nil)
}

// open appends the plaintext of the sealed record to dst (sealed[:0] opens
// in place). A record that is not the next one its sender sealed, or was
// altered, fails with ErrTampered (and ErrProtocol); the caller must then
// close the connection, as the state no longer follows the peer's.
func (s *cipherState) open(dst, sealed []byte) ([]byte, error) {
	seq := s.seq
	out, err := s.aead.Open(dst, s.nextNonce(), sealed, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %w: record %d from the %s", ErrProtocol, ErrTampered, seq, s.from)
	}
	return out, nil
}
