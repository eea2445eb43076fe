package rpc

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"runtime"
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

// rawConn opens a TCP connection, authenticated or not.
func rawConn(t *testing.T, addr string, auth bool) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(5 * time.Second))
	if auth {
		fr := frameReader{br: bufio.NewReader(nc)}
		nonce := make([]byte, nonceSize)
		rand.Read(nonce)
		if err := clientHandshake(&fr, nc, testSecret, nonce); err != nil {
			t.Fatal(err)
		}
	}
	return nc
}

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
		send      []byte
		halfClose bool // the frame is incomplete: hang up our side after it
	}{
		{"garbage before auth", false, bytes.Repeat([]byte("garbage!"), 100), false},
		{"short hello", false, []byte("hi"), true},
		{"garbage after auth", true, bytes.Repeat([]byte{0xff}, 200), false},
		{"huge body", true, hdr(typeRequest, 4, 0, 1<<62), false},
		{"body over MaxBody", true, hdr(typeRequest, 4, 0, 8<<20+1), false},
		{"huge args", true, hdr(typeRequest, 4, 1<<32-1, 0), false},
		{"long method", true, hdr(typeRequest, 129, 0, 0), false},
		{"response frame from client", true, hdr(typeResponse, 0, 0, 0), false},
		{"truncated args", true, append(hdr(typeRequest, 9, 1<<20, 0), "test.Echo{"...), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			nc := rawConn(t, addr, tc.auth)
			nc.Write(tc.send)
			if tc.halfClose {
				nc.(*net.TCPConn).CloseWrite()
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
		fr := frameReader{br: bufio.NewReader(bytes.NewReader(got))}
		h, err := fr.readHeader()
		if err != nil {
			t.Fatal(err)
		}
		name, _, _ := fr.readMeta(h)
		if h.typ != typeError || string(name) != codeAuth {
			t.Fatalf("got frame type %d code %q", h.typ, name)
		}
	})
}
