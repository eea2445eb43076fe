package rpc

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"poolfs/internal/testlog"
	"strings"
	"sync"
	"testing"
	"time"
)

// A man in the middle: a TCP proxy that passes the handshake on, cuts one
// direction into frames (their sizes are known to the test) and lets a
// case alter the second frame. Whatever it does, the receiver must close
// the connection with an error and never hand altered bytes on.

const (
	mitmBody    = 2 * recordMax // two full records, so they can be swapped
	verdictSize = headerSize + pubSize + macSize
)

// frameWireSize is the wire size of a frame with these section sizes.
func frameWireSize(name, args, body int) int {
	return sealedHeaderSize + sealedLen(name+args) + sealedLen(body)
}

// mitmCase alters frame (the second frame of its direction); first is the
// first frame, sent unaltered. It returns what the proxy sends instead,
// and whether to hang up after it.
type mitmCase struct {
	name     string
	toServer bool // alter client → server (requests), else responses
	alter    func(first, frame []byte) (out []byte, hangUp bool)
}

// bodyRecord returns the bounds of the body record i of a frame with a
// name-and-args section of meta bytes.
func bodyRecord(meta, i int) (start, end int) {
	start = sealedHeaderSize + sealedLen(meta) + i*sealedMax
	return start, start + sealedMax
}

// forged seals a frame with keys the proxy made up, at the right sequence
// number: the best a proxy without the secret can do.
func forged(seq uint64, meta int) []byte {
	c2s, _, _ := sessionKeys([]byte("guessed-secret-guessed-secret"), make([]byte, 32), make([]byte, nonceSize), make([]byte, nonceSize))
	c2s.seq = seq
	var buf bytes.Buffer
	fw := frameWriter{w: &buf, maxBody: DefaultMaxBody, cs: c2s, pool: &bufPool{}}
	fw.write(typeRequest, 2, "mitm.Put", nil, make([]byte, mitmBody))
	return buf.Bytes()
}

func mitmCases(reqMeta, respMeta int) []mitmCase {
	flip := func(off func(n int) int) func(first, frame []byte) ([]byte, bool) {
		return func(_, frame []byte) ([]byte, bool) {
			frame[off(len(frame))] ^= 0x04
			return frame, false
		}
	}
	return []mitmCase{
		// Controls: the proxy cuts frames right and passes them on.
		{"pass requests", true, func(_, frame []byte) ([]byte, bool) { return frame, false }},
		{"pass responses", false, func(_, frame []byte) ([]byte, bool) { return frame, false }},
		{"flip a request body bit", true, flip(func(n int) int { return n - 1000 })},
		{"flip a request header bit", true, flip(func(int) int { return 13 })},
		{"flip a request tag bit", true, flip(func(n int) int { return n - 1 })},
		{"replay the first request", true, func(first, _ []byte) ([]byte, bool) { return first, false }},
		{"inject a forged request first", true, func(_, frame []byte) ([]byte, bool) {
			// Records sent so far: header, name-and-args and two body
			// records of the first request.
			return append(forged(4, reqMeta), frame...), false
		}},
		{"reorder two body records", true, func(_, frame []byte) ([]byte, bool) {
			a0, a1 := bodyRecord(reqMeta, 0)
			b0, b1 := bodyRecord(reqMeta, 1)
			out := append(append(append(append([]byte{}, frame[:a0]...), frame[b0:b1]...), frame[a0:a1]...), frame[b1:]...)
			return out, false
		}},
		{"drop a record, inject the first request's", true, func(first, frame []byte) ([]byte, bool) {
			a0, a1 := bodyRecord(reqMeta, 0)
			copy(frame[a0:a1], first[a0:a1])
			return frame, false
		}},
		{"truncate a request", true, func(_, frame []byte) ([]byte, bool) { return frame[:len(frame)/2], true }},
		{"flip a response body bit", false, flip(func(n int) int { return n - 1000 })},
		{"replay the first response", false, func(first, _ []byte) ([]byte, bool) { return first, false }},
		{"reorder two response records", false, func(_, frame []byte) ([]byte, bool) {
			a0, a1 := bodyRecord(respMeta, 0)
			b0, b1 := bodyRecord(respMeta, 1)
			out := append(append(append(append([]byte{}, frame[:a0]...), frame[b0:b1]...), frame[a0:a1]...), frame[b1:]...)
			return out, false
		}},
	}
}

// startMITM proxies one connection to target, altering the second frame
// of one direction by tc.
func startMITM(t *testing.T, target string, tc mitmCase, frameSize int) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var conns []net.Conn
	var mu sync.Mutex
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		client, err := ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", target)
		if err != nil {
			client.Close()
			return
		}
		mu.Lock()
		conns = append(conns, client, server)
		mu.Unlock()
		// The handshake, then the identity exchange without identities:
		// the server's empty identity and verdict, the client's empty
		// identity, a sealed header each.
		src, dst, clear := server, client, serverHelloSize+verdictSize+2*sealedHeaderSize
		if tc.toServer {
			src, dst, clear = client, server, clientHelloSize+sealedHeaderSize
		}
		wg.Go(func() { io.Copy(src, dst); src.Close() }) // the other direction, as is
		defer dst.Close()
		if _, err := io.CopyN(dst, src, int64(clear)); err != nil {
			return
		}
		first := make([]byte, frameSize)
		if _, err := io.ReadFull(src, first); err != nil {
			return
		}
		dst.Write(first)
		frame := make([]byte, frameSize)
		if _, err := io.ReadFull(src, frame); err != nil {
			return
		}
		out, hangUp := tc.alter(bytes.Clone(first), frame)
		dst.Write(out)
		if hangUp {
			return
		}
		io.Copy(dst, src)
	})
	return ln.Addr().String()
}

func TestManInTheMiddle(t *testing.T) {
	body := make([]byte, mitmBody)
	for i := range body {
		body[i] = byte(rand.Uint32())
	}
	reqMeta, respMeta := len("mitm.Put"), 0
	reqSize := frameWireSize(reqMeta, 0, mitmBody)
	respSize := frameWireSize(respMeta, 0, mitmBody)
	for _, tc := range mitmCases(reqMeta, respMeta) {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var received [][]byte // every body the handler was given
			logs := &testlog.Buffer{}
			_, addr := startServer(t, ServerOptions{Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}, func(s *Server) {
				s.Handle("mitm.Put", func(ctx context.Context, req *Request) (*Response, error) {
					mu.Lock()
					received = append(received, bytes.Clone(req.Body))
					mu.Unlock()
					return &Response{Body: body}, nil
				})
			})
			frameSize := respSize
			if tc.toServer {
				frameSize = reqSize
			}
			c := dialTest(t, startMITM(t, addr, tc, frameSize), ClientOptions{MaxConns: 1})
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			got, err := c.CallBody(ctx, "mitm.Put", nil, body, nil, nil)
			if err != nil || !bytes.Equal(got, body) {
				t.Fatalf("first call, unaltered: %v", err)
			}
			got, err = c.CallBody(ctx, "mitm.Put", nil, body, nil, nil)
			mu.Lock()
			defer mu.Unlock()
			if strings.HasPrefix(tc.name, "pass") {
				if err != nil || !bytes.Equal(got, body) || len(received) != 2 {
					t.Fatalf("second call, passed on: %v (handler ran %d times)", err, len(received))
				}
				return
			}
			if err == nil || got != nil {
				t.Fatalf("second call, altered: got %d bytes and error %v", len(got), err)
			}
			if errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("second call hung: %v", err)
			}
			for i, r := range received {
				if !bytes.Equal(r, body) {
					t.Fatalf("handler call %d was given an altered body", i)
				}
			}
			if tc.toServer {
				// The server saw the request go wrong and ran nothing.
				if len(received) != 1 {
					t.Fatalf("handler ran %d times, want 1", len(received))
				}
				if !errors.Is(err, ErrUnavailable) {
					t.Errorf("client got %v, want ErrUnavailable", err)
				}
				want := "frame failed authentication"
				if strings.HasPrefix(tc.name, "truncate") {
					want = "unexpected EOF"
				}
				waitLog(t, logs, want)
			} else if !errors.Is(err, ErrTampered) || !errors.Is(err, ErrUnavailable) {
				t.Errorf("client got %v, want ErrTampered and ErrUnavailable", err)
			}
		})
	}
}

// waitLog waits for the server to log want (it logs as it closes).
func waitLog(t *testing.T, logs *testlog.Buffer, want string) {
	t.Helper()
	for start := time.Now(); time.Since(start) < 5*time.Second; time.Sleep(5 * time.Millisecond) {
		if strings.Contains(logs.String(), want) {
			return
		}
	}
	t.Errorf("server log lacks %q:\n%s", want, logs)
}

// Frames of one direction arrive strictly in order, but request and
// response alternate on a connection, so a proxy never holds two frames of
// one direction to swap. A decoder given two sealed frames swapped must
// still refuse the first.
func TestReorderedFrames(t *testing.T) {
	frames := []testFrame{
		{typ: typeRequest, id: 1, name: "a", args: []byte(`"first"`)},
		{typ: typeRequest, id: 2, name: "a", args: []byte(`"other"`)},
	}
	wire := encodeFrames(frames...)
	n := len(wire) / 2 // both frames seal to the same size
	swapped := append(append([]byte{}, wire[n:]...), wire[:n]...)
	got, err := readFrames(t, newFuzzReader(swapped), 2)
	if len(got) != 0 || !errors.Is(err, ErrTampered) {
		t.Fatalf("decoded %d frames, error %v; want none and ErrTampered", len(got), err)
	}
}
