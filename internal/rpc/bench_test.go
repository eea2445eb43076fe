package rpc

import (
	"context"
	"fmt"
	"sync"
	"testing"
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

// runClients runs b.N calls split over n goroutines sharing one Client.
func runClients(b *testing.B, n int, call func(dst []byte) error, dstSize int) {
	var wg sync.WaitGroup
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
