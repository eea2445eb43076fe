package rpc

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"poolfs/internal/identity"
)

// benchServer serves a null call, an upload sink and a download source.
func benchServer(b *testing.B, download []byte) string {
	_, addr := startServer(b, ServerOptions{}, func(s *Server) {
		s.Handle("bench.Null", func(ctx context.Context, req *Request) (*Response, error) {
			return nil, nil
		})
		s.Handle("bench.Put", func(ctx context.Context, req *Request) (*Response, error) {
			return &Response{Result: len(req.Body)}, nil
		})
		s.Handle("bench.Get", func(ctx context.Context, req *Request) (*Response, error) {
			return &Response{Body: download}, nil
		})
	})
	return addr
}

// reportCPU reports the CPU time of the whole process (client and server
// alike) per operation, until the returned function is called: on a
// shared machine it is steadier than the wall time, and it is what the
// cipher costs.
func reportCPU(b *testing.B) func() {
	start := cpuTime()
	return func() { b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op") }
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// runClients runs b.N calls split over n goroutines sharing one Client.
func runClients(b *testing.B, n int, call func(dst []byte) error, dstSize int) {
	var wg sync.WaitGroup
	defer reportCPU(b)()
	b.ResetTimer()
	for g := range n {
		calls := b.N / n
		if g < b.N%n {
			calls++
		}
		wg.Go(func() {
			dst := make([]byte, 0, dstSize)
			for range calls {
				if err := call(dst); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func BenchmarkCallSmall(b *testing.B) {
	addr := benchServer(b, nil)
	for _, clients := range []int{1, 8} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			c := dialTest(b, addr, ClientOptions{})
			b.ReportAllocs()
			runClients(b, clients, func([]byte) error {
				return c.Call(context.Background(), "bench.Null", nil, nil, nil)
			}, 0)
		})
	}
}

// BenchmarkCallSmallCertificates is BenchmarkCallSmall between a server
// and a client that prove certificates and check each other's again
// before every call (expiry and a revocation list of 1000 names,
// recheck.go).
func BenchmarkCallSmallCertificates(b *testing.B) {
	ca := newTestCA(b)
	later := time.Now().Add(time.Hour)
	revoked := map[string]bool{}
	for i := range 1000 {
		revoked[fmt.Sprintf("node%d", i)] = true
	}
	trust := func(roles ...identity.Role) *identity.Trust {
		return &identity.Trust{CA: ca.ca.Public(), Roles: roles, Revoked: func(c *identity.Cert) bool { return revoked[c.Name] }}
	}
	_, addr := startServer(b, ServerOptions{Identity: identity.NewCurrent(ca.issue("srv", identity.RoleServer, later)), Peers: trust()}, func(s *Server) {
		s.Handle("bench.Null", func(ctx context.Context, req *Request) (*Response, error) { return nil, nil })
	})
	c := dialTest(b, addr, ClientOptions{Identity: identity.NewCurrent(ca.issue("cli", identity.RoleClient, later)), Peers: trust(identity.RoleServer)})
	b.ReportAllocs()
	runClients(b, 1, func([]byte) error {
		return c.Call(context.Background(), "bench.Null", nil, nil, nil)
	}, 0)
}

func benchUpload(b *testing.B, size int) {
	addr := benchServer(b, nil)
	body := make([]byte, size)
	for _, clients := range []int{1, 8} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			c := dialTest(b, addr, ClientOptions{})
			b.SetBytes(int64(size))
			b.ReportAllocs()
			runClients(b, clients, func([]byte) error {
				var n int
				return c.Call(context.Background(), "bench.Put", nil, body, &n)
			}, 0)
		})
	}
}

func BenchmarkCallBody1M(b *testing.B) { benchUpload(b, 1<<20) }
func BenchmarkCallBody4M(b *testing.B) { benchUpload(b, 4<<20) }

func BenchmarkCallReadBody4M(b *testing.B) {
	const size = 4 << 20
	addr := benchServer(b, make([]byte, size))
	for _, clients := range []int{1, 8} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			c := dialTest(b, addr, ClientOptions{})
			b.SetBytes(size)
			b.ReportAllocs()
			runClients(b, clients, func(dst []byte) error {
				_, err := c.CallBody(context.Background(), "bench.Get", nil, nil, nil, dst)
				return err
			}, size)
		})
	}
}

// benchTCP is the floor under the call benchmarks: the same bodies over a
// bare loopback TCP connection, each answered by one byte (upload) or
// asked for with one byte (download); no framing, no cipher, no pool.
func benchTCP(b *testing.B, size int, upload bool) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		buf, one := make([]byte, size), make([]byte, 1)
		for {
			in, out := buf, one
			if !upload {
				in, out = one, buf
			}
			if _, err := io.ReadFull(nc, in); err != nil {
				return
			}
			if _, err := nc.Write(out); err != nil {
				return
			}
		}
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	buf, one := make([]byte, size), make([]byte, 1)
	b.SetBytes(int64(size))
	defer reportCPU(b)()
	for b.Loop() {
		out, in := buf, one
		if !upload {
			out, in = one, buf
		}
		if _, err := nc.Write(out); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(nc, in); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkTCPBody1M(b *testing.B)     { benchTCP(b, 1<<20, true) }
func BenchmarkTCPReadBody4M(b *testing.B) { benchTCP(b, 4<<20, false) }

// BenchmarkHandshake is the cost of authenticating one new connection,
// both ends, over a pipe: HMACs, two X25519 key pairs and exchanges, and
// the key derivation.
func BenchmarkHandshake(b *testing.B) {
	defer reportCPU(b)()
	for b.Loop() {
		cn, sn := net.Pipe()
		done := make(chan error, 1)
		go func() {
			_, _, _, err := serverHandshake(sn, testSecret, fuzzServerNonce, func() error { return nil })
			done <- err
		}()
		eph, err := newEphemeralKey()
		if err == nil {
			_, _, _, err = clientHandshake(cn, cn, testSecret, fuzzClientNonce, eph)
		}
		if err != nil || <-done != nil {
			b.Fatal(err)
		}
		cn.Close()
		sn.Close()
	}
}

// BenchmarkDial is the cost of a new connection over loopback (handshake
// and identity exchange), without certificates and with both sides
// proving one.
func BenchmarkDial(b *testing.B) {
	for _, certs := range []bool{false, true} {
		b.Run(map[bool]string{false: "secret-only", true: "certificates"}[certs], func(b *testing.B) {
			var sopts ServerOptions
			var copts ClientOptions
			if certs {
				ca := newTestCA(b)
				later := time.Now().Add(time.Hour)
				sopts = ServerOptions{Identity: identity.NewCurrent(ca.issue("srv", identity.RoleServer, later)), Peers: ca.trust()}
				copts = ClientOptions{Identity: identity.NewCurrent(ca.issue("cli", identity.RoleClient, later)), Peers: ca.trust(identity.RoleServer)}
			}
			_, addr := startServer(b, sopts, registerEcho)
			b.ResetTimer()
			for range b.N {
				c, err := Dial(addr, testSecret, copts)
				if err != nil {
					b.Fatal(err)
				}
				c.Close()
			}
		})
	}
}
