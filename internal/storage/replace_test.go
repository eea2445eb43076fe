package storage

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"testing"

	"poolfs/internal/chunkstore"
	"poolfs/internal/erasure"
	"poolfs/internal/placement"
	"poolfs/internal/rpc"
)

// TestReplacingWriteLimit checks the admission of client writes at a
// drive's client write limit, in process and over RPC: a fragment that
// replaces an older generation of itself the drive holds goes past the
// limit up to a quarter of the room above it; a new fragment, a
// replacement of a generation the drive does not hold, and a replacement
// beyond the allowance are refused with ErrFull; once the old generations
// are deleted, the room comes back.
func TestReplacingWriteLimit(t *testing.T) {
	frag := func(key erasure.FragmentKey) []byte {
		b := erasure.AlignedBuffer(erasure.FragmentSize(8192))
		for i := range b[erasure.HeaderSize(8192):] {
			b[erasure.HeaderSize(8192)+i] = byte(i*7) ^ byte(key.Gen) ^ byte(key.Stripe)
		}
		erasure.SealFragment(b, erasure.Header{Key: key, K: 1, M: 1, StripeLen: 8192, ShardSize: 8192})
		return b
	}
	f := int64(erasure.FragmentSize(8192))
	for _, path := range []string{"in process", "rpc"} {
		t.Run(path, func(t *testing.T) {
			// Capacity 20 fragments, limit 8: replacements may fill the
			// drive to 8 + 12/4 = 11.
			d, err := chunkstore.Open(t.TempDir()+"/d0", chunkstore.Options{Capacity: 20 * f})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { d.Close() })
			s := NewServer(map[placement.DriveID]chunkstore.Drive{0: d}, nil)
			s.limits.limit = map[placement.DriveID]int64{0: 8 * f}
			s.limits.pending = map[placement.DriveID]int64{}
			s.limits.used = map[placement.DriveID]usedAt{}
			drive := servedDrive(t, s, path)
			ctx := context.Background()
			write := func(stripe, gen, replaces uint64) error {
				key := erasure.FragmentKey{Ino: 9, Stripe: stripe, Gen: gen, Index: 1}
				return drive.WriteFragment(Replacing(ctx, replaces), key, frag(key))
			}
			for st := uint64(0); st < 8; st++ {
				if err := write(st, 10, 0); err != nil {
					t.Fatalf("new fragment %d within the limit: %v", st, err)
				}
			}
			if err := write(8, 10, 0); !errors.Is(err, chunkstore.ErrFull) {
				t.Fatalf("new fragment past the limit: %v, want ErrFull", err)
			}
			if err := write(0, 20, 10); err != nil {
				t.Fatalf("replacement past the limit: %v", err)
			}
			if err := write(9, 20, 10); !errors.Is(err, chunkstore.ErrFull) {
				t.Fatalf("replacement of a fragment the drive does not hold: %v, want ErrFull", err)
			}
			if err := write(1, 20, 5); !errors.Is(err, chunkstore.ErrFull) {
				t.Fatalf("replacement of a generation the drive does not hold: %v, want ErrFull", err)
			}
			for st := uint64(1); st < 3; st++ {
				if err := write(st, 20, 10); err != nil {
					t.Fatalf("replacement %d within the allowance: %v", st, err)
				}
			}
			if err := write(3, 20, 10); !errors.Is(err, chunkstore.ErrFull) {
				t.Fatalf("replacement past the allowance: %v, want ErrFull", err)
			}
			for st := uint64(0); st < 3; st++ { // the collector
				if err := drive.DeleteFragment(ctx, erasure.FragmentKey{Ino: 9, Stripe: st, Gen: 10, Index: 1}); err != nil {
					t.Fatal(err)
				}
			}
			if err := write(3, 20, 10); err != nil {
				t.Fatalf("replacement once old generations are deleted: %v", err)
			}
			for st := uint64(0); st < 4; st++ {
				key := erasure.FragmentKey{Ino: 9, Stripe: st, Gen: 20, Index: 1}
				got, err := drive.ReadFragment(ctx, key, 0, -1, nil)
				if err != nil || !bytes.Equal(got, frag(key)) {
					t.Fatalf("read back %v: %d bytes, %v (equal %v)", key, len(got), err, bytes.Equal(got, frag(key)))
				}
			}
		})
	}
}

// servedDrive returns drive 0 of s as a client sees it: through InProcess,
// or over a real RPC connection.
func servedDrive(t *testing.T, s *Server, path string) chunkstore.Drive {
	t.Helper()
	if path == "in process" {
		d, err := s.InProcess(&remoteStub{}).Drive(nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	secret := bytes.Repeat([]byte("s"), 32)
	r := rpc.NewServer(secret, rpc.ServerOptions{Errors: Errors()})
	s.Register(r)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go r.Serve(ln)
	t.Cleanup(func() { r.Close() })
	c, err := rpc.Dial(ln.Addr().String(), secret, rpc.ClientOptions{Errors: Errors()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return NewRemoteDrive(c, 0)
}

// FuzzWriteArgs feeds arbitrary storage.Write arguments, as they come off
// the network, to a server: bad ones are refused with an error, never a
// panic.
func FuzzWriteArgs(f *testing.F) {
	f.Add([]byte(`{"drive":0,"key":{"Ino":1,"Stripe":2,"Gen":5,"Index":1},"replaces":4}`))
	f.Add([]byte(`{"drive":0,"key":{"Ino":1,"Stripe":2,"Gen":5,"Index":1},"replaces":18446744073709551615}`))
	f.Add([]byte(`{"drive":7,"replaces":-1}`))
	f.Add([]byte(`{"replaces":"x"}`))
	d, err := chunkstore.Open(f.TempDir()+"/d0", chunkstore.Options{Capacity: 1 << 20})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { d.Close() })
	s := NewServer(map[placement.DriveID]chunkstore.Drive{0: d}, nil)
	s.limits.limit = map[placement.DriveID]int64{0: 64 << 10}
	s.limits.pending = map[placement.DriveID]int64{}
	s.limits.used = map[placement.DriveID]usedAt{}
	body := erasure.AlignedBuffer(erasure.Align)
	f.Fuzz(func(t *testing.T, b []byte) {
		var a fragArgs
		valid := json.Unmarshal(b, &a) == nil
		_, err := s.handleWrite(context.Background(), &rpc.Request{Method: "storage.Write", Args: b, Body: body})
		if !valid && !errors.Is(err, chunkstore.ErrInvalid) {
			t.Fatalf("arguments %q that do not decode: %v, want ErrInvalid", b, err)
		}
	})
}
