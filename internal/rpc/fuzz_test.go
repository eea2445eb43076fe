package rpc

import (
	"bufio"
	"bytes"
	"crypto/ecdh"
	"encoding/binary"
	"errors"
	"io"
	"slices"
	"testing"
)

const fuzzMaxBody = 1 << 20

var (
	fuzzServerNonce = bytes.Repeat([]byte{0x5a}, nonceSize)
	fuzzClientNonce = bytes.Repeat([]byte{0xc3}, nonceSize)
)

// fuzzCipher returns the client-to-server cipher of a fixed session; each
// copy keeps its own sequence number, so one copy seals and another opens.
func fuzzCipher() cipherState {
	c2s, _, err := sessionKeys(testSecret, bytes.Repeat([]byte{0x77}, 32), fuzzServerNonce, fuzzClientNonce)
	if err != nil {
		panic(err)
	}
	return c2s
}

type testFrame struct {
	typ        frameType
	id         uint64
	name       string
	args, body []byte
}

// encodeFrames seals frames as one connection direction would, starting at
// sequence number 0.
func encodeFrames(frames ...testFrame) []byte {
	var buf bytes.Buffer
	fw := frameWriter{w: &buf, maxBody: DefaultMaxBody, cs: fuzzCipher(), pool: &bufPool{}}
	for _, f := range frames {
		if err := fw.write(f.typ, f.id, f.name, f.args, f.body); err != nil {
			panic(err)
		}
	}
	return buf.Bytes()
}

func newFuzzReader(wire []byte) *frameReader {
	return &frameReader{br: bufio.NewReader(bytes.NewReader(wire)), maxBody: fuzzMaxBody, cs: fuzzCipher(), pool: &bufPool{}}
}

// readFrames decodes up to max frames, returning those read whole and the
// error that stopped it (nil if max frames were read).
func readFrames(t *testing.T, fr *frameReader, max int) ([]testFrame, error) {
	var got []testFrame
	for range max {
		h, err := fr.readHeader()
		if err != nil {
			return got, err
		}
		if h.nameLen > maxMethodLen || h.argsLen > maxArgsLen || h.bodyLen > fuzzMaxBody || h.flags != 0 {
			t.Fatalf("limits not enforced: %+v", h)
		}
		name, args, err := fr.readMeta(h)
		if err != nil {
			return got, err
		}
		if cap(args) > h.argsLen || len(name) != h.nameLen {
			t.Fatalf("sections leak: name %d/%d args cap %d/%d", len(name), h.nameLen, cap(args), h.argsLen)
		}
		f := testFrame{typ: h.typ, id: h.id, name: string(name), args: bytes.Clone(args), body: make([]byte, h.bodyLen)}
		if err := fr.readBody(f.body); err != nil {
			return got, err
		}
		got = append(got, f)
	}
	return got, nil
}

func checkReadErr(t *testing.T, err error) {
	t.Helper()
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF && !errors.Is(err, ErrProtocol) {
		t.Fatalf("unexpected error %v", err)
	}
}

// sealPlainStream seals a plaintext stream the way a sender cuts it into
// records, independently of frameWriter: a header record, then the
// name-and-args and body sections (lengths taken from the header as is) in
// records of recordMax bytes. It stops where p runs out, sealing what is
// left as a short record.
func sealPlainStream(p []byte) []byte {
	cs := fuzzCipher()
	var out []byte
	for len(p) > 0 {
		n := min(len(p), headerSize)
		out = cs.seal(out, p[:n])
		h := p[:n]
		p = p[n:]
		if n < headerSize {
			break
		}
		sections := []uint64{
			uint64(binary.BigEndian.Uint16(h[12:])) + uint64(binary.BigEndian.Uint32(h[14:])),
			binary.BigEndian.Uint64(h[18:]),
		}
		for _, sec := range sections {
			for sec > 0 && len(p) > 0 {
				m := min(sec, recordMax, uint64(len(p)))
				out = cs.seal(out, p[:m])
				p, sec = p[m:], sec-m
			}
		}
	}
	return out
}

// plainFrames encodes frames without sealing, as sealPlainStream's input.
func plainFrames(frames ...testFrame) []byte {
	var out []byte
	for _, f := range frames {
		h := make([]byte, headerSize)
		putHeader(h, header{typ: f.typ, id: f.id, nameLen: len(f.name), argsLen: len(f.args), bodyLen: len(f.body)})
		out = append(append(append(append(out, h...), f.name...), f.args...), f.body...)
	}
	return out
}

var fuzzFrames = []testFrame{
	{typ: typeRequest, id: 1, name: "meta.Lookup", args: []byte(`{"Parent":1,"Name":"a"}`)},
	{typ: typeResponse, id: 7, args: []byte(`{}`), body: bytes.Repeat([]byte("body bytes "), 2*recordMax/11)},
	{typ: typeError, id: 3, name: "notfound", args: []byte("meta: not found")},
}

// FuzzReadFrame feeds the frame decoder every sequence of frames an
// authenticated peer could seal (the fuzzer's bytes are the plaintext): it
// must not panic, must enforce every limit, and must decode exactly what
// was sealed, which frameWriter seals to the same bytes.
func FuzzReadFrame(f *testing.F) {
	f.Add(plainFrames(fuzzFrames...))
	f.Add(plainFrames(testFrame{typ: typeRequest, id: 1, name: "a", body: []byte{1}}, testFrame{typ: typeRequest, id: 2, name: "b"}))
	f.Add(hdr(typeRequest, 4, 0, 1<<62))
	f.Add(hdr(typeRequest, 4, maxArgsLen, 0))
	f.Add(hdr(typeAuth, 0, 1<<30, 0))
	f.Add([]byte("PFS2 not a frame"))
	f.Fuzz(func(t *testing.T, plain []byte) {
		wire := sealPlainStream(plain)
		got, err := readFrames(t, newFuzzReader(wire), 8)
		checkReadErr(t, err)
		// What was decoded seals to the same bytes.
		re := encodeFrames(got...)
		if !bytes.HasPrefix(wire, re) {
			t.Fatalf("re-encoding of %d frames differs", len(got))
		}
		if err == io.EOF && !bytes.Equal(re, wire) {
			t.Fatalf("decoder stopped cleanly before the end")
		}
	})
}

// FuzzReadFrameTampered alters a sealed stream as a man in the middle
// could (flip bits, insert bytes, cut bytes out, or replace it with
// arbitrary bytes): every frame the decoder returns must be the frame that
// was sent at that place, and nothing altered is ever returned.
func FuzzReadFrameTampered(f *testing.F) {
	wire := encodeFrames(fuzzFrames...)
	f.Add(byte(0), uint32(0), []byte{})
	f.Add(byte(1), uint32(5), []byte{0x01})
	f.Add(byte(1), uint32(len(wire)-1), []byte{0x80})
	f.Add(byte(2), uint32(sealedHeaderSize), wire[:sealedHeaderSize])
	f.Add(byte(3), uint32(100), make([]byte, 16))
	f.Add(byte(4), uint32(0), wire[:200])
	f.Fuzz(func(t *testing.T, op byte, pos uint32, b []byte) {
		at := int(pos) % (len(wire) + 1)
		var bad []byte
		switch op % 5 {
		case 0: // unchanged: everything decodes
			bad = wire
		case 1: // xor b into the stream at pos
			bad = bytes.Clone(wire)
			for i, x := range b {
				if at+i < len(bad) {
					bad[at+i] ^= x
				}
			}
		case 2: // insert b at pos (a replayed or injected piece)
			bad = append(append(append([]byte{}, wire[:at]...), b...), wire[at:]...)
		case 3: // cut len(b) bytes out at pos (a dropped piece)
			bad = append(append([]byte{}, wire[:at]...), wire[min(at+len(b), len(wire)):]...)
		case 4: // arbitrary bytes
			bad = b
		}
		got, err := readFrames(t, newFuzzReader(bad), len(fuzzFrames)+1)
		checkReadErr(t, err)
		for i, g := range got {
			if i >= len(fuzzFrames) {
				t.Fatalf("decoded %d frames from a stream of %d", len(got), len(fuzzFrames))
			}
			w := fuzzFrames[i]
			if g.typ != w.typ || g.id != w.id || g.name != w.name || !bytes.Equal(g.args, w.args) || !bytes.Equal(g.body, w.body) {
				t.Fatalf("frame %d decoded altered (op %d at %d)", i, op%5, at)
			}
		}
		if bytes.Equal(bad, wire) != (len(got) == len(fuzzFrames) && err == io.EOF) {
			t.Fatalf("stream equal to what was sent: %v; decoded %d frames, then %v", bytes.Equal(bad, wire), len(got), err)
		}
	})
}

// fixedKey returns an X25519 key made from one repeated byte.
func fixedKey(b byte) *ecdh.PrivateKey {
	k, err := ecdh.X25519().NewPrivateKey(bytes.Repeat([]byte{b}, 32))
	if err != nil {
		panic(err)
	}
	return k
}

// FuzzHandshake feeds arbitrary bytes to both ends of the handshake: they
// must not panic, and must succeed only on a correct MAC.
func FuzzHandshake(f *testing.F) {
	clientKey, serverKey := fixedKey(0x11), fixedKey(0x22)
	clientPub, serverPub := clientKey.PublicKey().Bytes(), serverKey.PublicKey().Bytes()
	goodClientHello := slices.Concat(fuzzClientNonce, clientPub, handshakeMAC(testSecret, macLabelClient, fuzzServerNonce, fuzzClientNonce, clientPub))
	goodVerdict := plainFrame(typeAuth, "", slices.Concat(serverPub, handshakeMAC(testSecret, macLabelServer, fuzzClientNonce, fuzzServerNonce, clientPub, serverPub)))
	goodServerSide := append([]byte{'P', 'F', 'S', protocolVersion}, fuzzServerNonce...)
	f.Add(goodClientHello)
	f.Add(append(goodServerSide, goodVerdict...))
	f.Add(append(goodServerSide, plainFrame(typeError, codeAuth, []byte("no"))...))
	f.Add(append(goodServerSide, plainFrame(typeError, codeBusy, []byte("at limit"))...))
	f.Add(append(goodServerSide, hdr(typeAuth, 0, 1<<30, 0)...))
	f.Add(append([]byte("PFS2"), fuzzServerNonce...))
	f.Add(make([]byte, clientHelloSize))
	f.Fuzz(func(t *testing.T, data []byte) {
		// Server side: data is what the client sent.
		rw := struct {
			io.Reader
			io.Writer
		}{bytes.NewReader(data), io.Discard}
		_, _, _, err := serverHandshake(rw, testSecret, fuzzServerNonce, func() error { return nil })
		if (err == nil) != (len(data) >= clientHelloSize && bytes.Equal(data[:clientHelloSize], goodClientHello)) {
			t.Fatalf("server handshake: err %v on %x", err, data)
		}
		// Client side: data is what the server sent.
		_, _, _, err = clientHandshake(bytes.NewReader(data), io.Discard, testSecret, fuzzClientNonce, clientKey)
		want := append(append([]byte{}, goodServerSide...), goodVerdict...)
		if (err == nil) != (len(data) >= len(want) && bytes.Equal(data[:len(want)], want)) {
			t.Fatalf("client handshake: err %v on %x", err, data)
		}
	})
}
