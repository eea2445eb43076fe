package rpc

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestWrongSecret(t *testing.T) {
	_, addr := startServer(t, ServerOptions{}, registerEcho)
	_, err := Dial(addr, []byte("not-the-cluster-secret"), ClientOptions{})
	if !errors.Is(err, ErrAuth) || errors.Is(err, ErrUnavailable) {
		t.Fatalf("got %v, want ErrAuth", err)
	}
	if err.Error() == "" || !bytes.Contains([]byte(err.Error()), []byte("rpc: authentication failed")) {
		t.Errorf("message %q", err)
	}
	// Nobody listening: ErrUnavailable.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := ln.Addr().String()
	ln.Close()
	if _, err := Dial(dead, testSecret, ClientOptions{}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("got %v, want ErrUnavailable", err)
	}
	// A server that does not speak our protocol: ErrProtocol, not a hang.
	ln, _ = net.Listen("tcp", "127.0.0.1:0")
	defer ln.Close()
	go func() {
		nc, err := ln.Accept()
		if err == nil {
			nc.Write([]byte("SSH-2.0-OpenSSH_9.6\r\n" + string(make([]byte, 64))))
			io.Copy(io.Discard, nc)
		}
	}()
	if _, err := Dial(ln.Addr().String(), testSecret, ClientOptions{}); !errors.Is(err, ErrProtocol) {
		t.Fatalf("got %v, want ErrProtocol", err)
	}
}

// testConn is a raw TCP connection to a server, authenticated or not; an
// authenticated one holds the ciphers, so a test can send sealed frames of
// its own making.
type testConn struct {
	net.Conn
	send, recv cipherState
}

// rawConn opens a TCP connection, authenticated or not.
func rawConn(t *testing.T, addr string, auth bool) *testConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(5 * time.Second))
	tc := &testConn{Conn: nc}
	if auth {
		nonce := make([]byte, nonceSize)
		rand.Read(nonce)
		eph, err := newEphemeralKey()
		if err != nil {
			t.Fatal(err)
		}
		var transcript []byte
		if tc.send, tc.recv, transcript, err = clientHandshake(nc, nc, testSecret, nonce, eph); err != nil {
			t.Fatal(err)
		}
		// The identity exchange, presenting none: the server's verdict is
		// the last thing it sends, so the reader's buffer holds no more.
		fr := frameReader{br: bufio.NewReaderSize(nc, readBufSize), maxBody: DefaultMaxBody, cs: tc.recv, pool: &bufPool{}}
		fw := frameWriter{w: nc, maxBody: DefaultMaxBody, cs: tc.send, pool: &bufPool{}}
		if _, err := (&Client{addr: addr}).clientIdentity(&fr, &fw, transcript, nil); err != nil {
			t.Fatal(err)
		}
		tc.send, tc.recv = fw.cs, fr.cs
	}
	return tc
}

// sealed seals b as one record of tc's next sequence number.
func (tc *testConn) sealed(b []byte) []byte { return tc.send.seal(nil, b) }

// expectClosed reads until the server closes nc and returns what it sent.
func expectClosed(t *testing.T, nc net.Conn) []byte {
	t.Helper()
	got, err := io.ReadAll(nc)
	if err != nil && !errors.Is(err, net.ErrClosed) && !isReset(err) {
		t.Fatalf("server did not close the connection: %v", err)
	}
	return got
}

func isReset(err error) bool {
	var ne *net.OpError
	return errors.As(err, &ne) && !ne.Timeout()
}

func hdr(typ frameType, nameLen, argsLen, bodyLen uint64) []byte {
	b := make([]byte, headerSize)
	putHeader(b, header{typ: typ, id: 1})
	// Write lengths by hand: they may exceed what header can hold.
	b[12], b[13] = byte(nameLen>>8), byte(nameLen)
	for i := range 4 {
		b[14+i] = byte(argsLen >> (24 - 8*i))
	}
	for i := range 8 {
		b[18+i] = byte(bodyLen >> (56 - 8*i))
	}
	return b
}

func TestHostileClients(t *testing.T) {
	_, addr := startServer(t, ServerOptions{MaxBody: 8 << 20}, registerEcho)
	good := dialTest(t, addr, ClientOptions{})

	cases := []struct {
		name      string
		auth      bool
		send      func(tc *testConn) []byte
		halfClose bool // the frame is incomplete: hang up our side after it
	}{
		{"garbage before auth", false, raw(bytes.Repeat([]byte("garbage!"), 100)), false},
		{"short hello", false, raw([]byte("hi")), true},
		{"garbage after auth", true, raw(bytes.Repeat([]byte{0xff}, 200)), false},
		{"unsealed frame after auth", true, raw(plainFrame(typeRequest, "test.Echo", []byte(`{"Name":"`+strings.Repeat("x", 100)+`"}`))), false},
		{"huge body", true, sealedHdr(typeRequest, 4, 0, 1<<62), false},
		{"body over MaxBody", true, sealedHdr(typeRequest, 4, 0, 8<<20+1), false},
		{"huge args", true, sealedHdr(typeRequest, 4, 1<<32-1, 0), false},
		{"long method", true, sealedHdr(typeRequest, 129, 0, 0), false},
		{"response frame from client", true, sealedHdr(typeResponse, 0, 0, 0), false},
		{"truncated args", true, func(tc *testConn) []byte {
			return append(tc.sealed(hdr(typeRequest, 9, 1<<20, 0)), tc.sealed([]byte("test.Echo{"))...)
		}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			nc := rawConn(t, addr, tc.auth)
			nc.Write(tc.send(nc))
			if tc.halfClose {
				nc.Conn.(*net.TCPConn).CloseWrite()
			}
			expectClosed(t, nc)
			runtime.ReadMemStats(&after)
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 4<<20 {
				t.Errorf("server allocated %d bytes for a hostile frame", grew)
			}
			if err := good.Call(t.Context(), "test.Echo", echoArgs{}, nil, nil); err != nil {
				t.Fatalf("server stopped serving others: %v", err)
			}
		})
	}
	t.Run("wrong MAC gets auth error frame", func(t *testing.T) {
		nc := rawConn(t, addr, false)
		var hello [serverHelloSize]byte
		io.ReadFull(nc, hello[:])
		nc.Write(make([]byte, clientHelloSize))
		got := expectClosed(t, nc)
		h, name, _, err := readVerdict(bytes.NewReader(got))
		if err != nil {
			t.Fatal(err)
		}
		if h.typ != typeError || string(name) != codeAuth {
			t.Fatalf("got frame type %d code %q", h.typ, name)
		}
	})
}

func raw(b []byte) func(*testConn) []byte { return func(*testConn) []byte { return b } }

func sealedHdr(typ frameType, nameLen, argsLen, bodyLen uint64) func(*testConn) []byte {
	return func(tc *testConn) []byte { return tc.sealed(hdr(typ, nameLen, argsLen, bodyLen)) }
}

// Peers of different protocol versions fail at the handshake with an error
// that says so, never by exchanging frames the other misreads.
func TestProtocolVersionMismatch(t *testing.T) {
	t.Run("new client, version 2 server", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			nc, err := ln.Accept()
			if err == nil {
				nc.Write(append([]byte("PFS2"), make([]byte, nonceSize)...))
				io.Copy(io.Discard, nc)
				nc.Close()
			}
		}()
		_, err = Dial(ln.Addr().String(), testSecret, ClientOptions{})
		if !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), "server speaks rpc protocol version '2', this client speaks '3'") {
			t.Fatalf("got %v, want ErrProtocol naming both versions", err)
		}
	})
	t.Run("version 2 client, new server", func(t *testing.T) {
		_, addr := startServer(t, ServerOptions{}, registerEcho)
		nc := rawConn(t, addr, false)
		var hello [serverHelloSize]byte
		if _, err := io.ReadFull(nc, hello[:]); err != nil {
			t.Fatal(err)
		}
		// A version 2 client checks for "PFS2" and stops with "server
		// speaks rpc protocol version '3'" before it sends a byte.
		if string(hello[:4]) == "PFS2" {
			t.Fatalf("hello %q looks like version 2", hello[:4])
		}
		// Had it answered, its MAC (label "poolfs rpc v2 client") is not a
		// version 3 MAC, even with the right secret: the server refuses it.
		v2 := make([]byte, nonceSize+pubSize, clientHelloSize)
		v2 = append(v2, handshakeMAC(testSecret, "poolfs rpc v2 client", hello[4:], make([]byte, nonceSize), make([]byte, pubSize))...)
		nc.Write(v2)
		h, name, _, err := readVerdict(bytes.NewReader(expectClosed(t, nc)))
		if err != nil || h.typ != typeError || string(name) != codeAuth {
			t.Fatalf("got frame type %d code %q, err %v; want an auth error", h.typ, name, err)
		}
	})
}

// handshakePair runs both ends of a handshake over a pipe with fixed
// nonces and returns the client-to-server cipher of each end.
func handshakePair(t *testing.T) (client, server cipherState) {
	t.Helper()
	cn, sn := net.Pipe()
	defer cn.Close()
	defer sn.Close()
	done := make(chan error, 1)
	go func() {
		var err error
		server, _, _, err = serverHandshake(sn, testSecret, fuzzServerNonce, func() error { return nil })
		done <- err
	}()
	eph, err := newEphemeralKey()
	if err != nil {
		t.Fatal(err)
	}
	client, _, _, err = clientHandshake(cn, cn, testSecret, fuzzClientNonce, eph)
	if err != nil || <-done != nil {
		t.Fatalf("handshake: %v", err)
	}
	return client, server
}

// The record keys do not follow from the secret and what crosses the wire:
// two sessions with the same secret and the same nonces get different keys
// (from their ephemeral X25519 keys), so recorded traffic stays sealed to
// whoever learns the secret later; and both ends of a session agree.
func TestSessionKeysAreEphemeral(t *testing.T) {
	c1, s1 := handshakePair(t)
	c2, _ := handshakePair(t)
	msg := []byte("the same record in two sessions")
	sealed1, sealed2 := c1.seal(nil, msg), c2.seal(nil, msg)
	if bytes.Equal(sealed1, sealed2) {
		t.Fatal("two sessions with the same secret and nonces sealed alike")
	}
	if got, err := s1.open(nil, sealed1); err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("server of session 1 cannot open its client's record: %v", err)
	}
}
