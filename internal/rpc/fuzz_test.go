package rpc

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"testing"
)

const fuzzMaxBody = 1 << 20

func encodeFrame(typ frameType, id uint64, name string, args, body []byte) []byte {
	var buf bytes.Buffer
	fw := frameWriter{w: &buf, maxBody: DefaultMaxBody}
	if err := fw.write(typ, id, name, args, body); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// FuzzReadFrame feeds arbitrary bytes to the frame decoder: it must not
// panic, must enforce every limit, and must decode exactly what was encoded.
func FuzzReadFrame(f *testing.F) {
	f.Add(encodeFrame(typeRequest, 1, "meta.Lookup", []byte(`{"Parent":1,"Name":"a"}`), nil))
	f.Add(encodeFrame(typeResponse, 7, "", []byte(`{}`), []byte("body bytes")))
	f.Add(encodeFrame(typeError, 3, "notfound", []byte("meta: not found"), nil))
	f.Add(append(encodeFrame(typeRequest, 1, "a", nil, []byte{1}), encodeFrame(typeRequest, 2, "b", nil, nil)...))
	f.Add(hdr(typeRequest, 4, 0, 1<<62))
	f.Add(hdr(typeRequest, 4, maxArgsLen, 0))
	f.Add([]byte("PFS1 not a frame"))
	f.Fuzz(func(t *testing.T, data []byte) {
		fr := frameReader{br: bufio.NewReader(bytes.NewReader(data)), maxBody: fuzzMaxBody}
		off := 0
		for range 8 {
			h, err := fr.readHeader()
			if err != nil {
				if err != io.EOF && err != io.ErrUnexpectedEOF && !errors.Is(err, ErrProtocol) {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if h.nameLen > maxMethodLen || h.argsLen > maxArgsLen || h.bodyLen > fuzzMaxBody || h.flags != 0 {
				t.Fatalf("limits not enforced: %+v", h)
			}
			name, args, err := fr.readMeta(h)
			if err != nil {
				return
			}
			if cap(args) > h.argsLen || len(name) != h.nameLen {
				t.Fatalf("sections leak: name %d/%d args cap %d/%d", len(name), h.nameLen, cap(args), h.argsLen)
			}
			body := make([]byte, h.bodyLen)
			if err := fr.readBody(body); err != nil {
				return
			}
			// What was decoded encodes to the same bytes.
			re := encodeFrame(h.typ, h.id, string(name), args, body)
			if !bytes.Equal(re, data[off:off+len(re)]) {
				t.Fatalf("re-encoding differs at frame offset %d", off)
			}
			off += len(re)
		}
	})
}

var (
	fuzzServerNonce = bytes.Repeat([]byte{0x5a}, nonceSize)
	fuzzClientNonce = bytes.Repeat([]byte{0xc3}, nonceSize)
)

// FuzzHandshake feeds arbitrary bytes to both ends of the handshake: they
// must not panic, and must succeed only on a correct MAC.
func FuzzHandshake(f *testing.F) {
	goodClientHello := append(append([]byte{}, fuzzClientNonce...), handshakeMAC(testSecret, "client", fuzzServerNonce, fuzzClientNonce)...)
	goodVerdict := encodeFrame(typeAuth, 0, "", handshakeMAC(testSecret, "server", fuzzClientNonce, fuzzServerNonce), nil)
	goodServerSide := append([]byte(handshakeMagic), fuzzServerNonce...)
	f.Add(goodClientHello)
	f.Add(append(goodServerSide, goodVerdict...))
	f.Add(append(goodServerSide, encodeFrame(typeError, 0, codeAuth, []byte("no"), nil)...))
	f.Add(append(goodServerSide, hdr(typeAuth, 0, 1<<30, 0)...))
	f.Add(make([]byte, clientHelloSize))
	f.Fuzz(func(t *testing.T, data []byte) {
		// Server side: data is what the client sent.
		fr := frameReader{br: bufio.NewReader(bytes.NewReader(data)), maxBody: fuzzMaxBody}
		err := serverHandshake(&fr, io.Discard, testSecret, fuzzServerNonce)
		if (err == nil) != (len(data) >= clientHelloSize && bytes.Equal(data[:clientHelloSize], goodClientHello)) {
			t.Fatalf("server handshake: err %v on %x", err, data)
		}
		// Client side: data is what the server sent.
		fr = frameReader{br: bufio.NewReader(bytes.NewReader(data)), maxBody: fuzzMaxBody}
		err = clientHandshake(&fr, io.Discard, testSecret, fuzzClientNonce)
		want := append(append([]byte{}, goodServerSide...), goodVerdict...)
		if (err == nil) != (len(data) >= len(want) && bytes.Equal(data[:len(want)], want)) {
			t.Fatalf("client handshake: err %v on %x", err, data)
		}
	})
}
