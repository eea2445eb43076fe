package fuseuring

import (
	"bytes"
	"encoding/binary"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// dataFS answers READ with bytes derived from the offset and keeps what
// WRITE sends; with wait set it answers EAGAIN, as a Try server's
// handlers do where they would wait.
type dataFS struct {
	fuse.RawFileSystem
	wait  bool
	calls int
	got   []byte
}

func (d *dataFS) Read(_ <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	d.calls++
	if d.wait {
		return nil, fuse.Status(syscall.EAGAIN)
	}
	b := buf[:in.Size]
	for i := range b {
		b[i] = byte(in.Offset) + byte(i)
	}
	return fuse.ReadResultData(b), fuse.OK
}

func (d *dataFS) Write(_ <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	d.calls++
	if d.wait {
		return 0, fuse.Status(syscall.EAGAIN)
	}
	d.got = append([]byte(nil), data...)
	return uint32(len(data)), fuse.OK
}

func ioIn(off uint64, size uint32) []byte {
	b := make([]byte, 40) // fuse_read_in and fuse_write_in
	binary.LittleEndian.PutUint64(b[8:], off)
	binary.LittleEndian.PutUint32(b[16:], size)
	return b
}

// TestTryInline: small READs and WRITEs are served by the Try server on
// the queue's thread; one that answers EAGAIN leaves the entry exactly as
// the kernel laid it out, so that the ordinary server then serves it
// (the WRITE's data intact); large ones and other opcodes are not tried.
func TestTryInline(t *testing.T) {
	tr, e := testTransport(t, nil)
	try, plain := &dataFS{RawFileSystem: fuse.NewDefaultRawFileSystem()}, &dataFS{RawFileSystem: fuse.NewDefaultRawFileSystem()}
	for _, p := range []struct {
		ps  **fuse.ProtocolServer
		raw *dataFS
	}{{&tr.ps, plain}, {&tr.opts.Try, try}} {
		*p.ps = fuse.NewProtocolServer(p.raw, &fuse.MountOptions{MaxWrite: 1 << 16})
		if err := Init(*p.ps, &fuse.InitIn{Major: 7, Minor: 41, MaxReadAhead: 1 << 16}); err != nil {
			t.Fatal(err)
		}
	}
	tr.opts.InlineMax = 8 << 10
	data := bytes.Repeat([]byte("poolfs"), 1000)
	cases := []struct {
		name    string
		opcode  uint32
		op, pay []byte
		wait    bool
		tried   bool // the Try server was asked
		inline  bool // and answered
		errno   syscall.Errno
	}{
		{"read served inline", opRead, ioIn(3, 4096), nil, false, true, true, 0},
		{"read that would wait", opRead, ioIn(3, 4096), nil, true, true, false, 0},
		{"read larger than InlineMax", opRead, ioIn(3, 16<<10), nil, false, false, false, 0},
		{"write served inline", opWrite, ioIn(0, uint32(len(data))), data, false, true, true, 0},
		{"write that would wait", opWrite, ioIn(0, uint32(len(data))), data, true, true, false, 0},
		{"getattr", 3, make([]byte, 16), nil, false, false, false, syscall.ENOSYS},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			unique := uint64(200 + i)
			request(e, tc.opcode, unique, tc.op, tc.pay)
			pay := bytes.Clone(e.payload[:len(tc.pay)])
			head := bytes.Clone(e.header)
			try.wait, try.calls, try.got, plain.got = tc.wait, 0, nil, nil
			id, ok := tr.tryInline(e)
			if tried := try.calls > 0; tried != tc.tried || ok != tc.inline {
				t.Fatalf("tried %v, served inline %v; want %v, %v", tried, ok, tc.tried, tc.inline)
			}
			if !ok {
				if !bytes.Equal(e.header, head) || !bytes.Equal(e.payload[:len(tc.pay)], pay) {
					t.Fatal("the entry changed although the request was not served")
				}
				id = tr.serve(e)
			}
			if id != unique {
				t.Fatalf("commit id %d, want %d", id, unique)
			}
			errno, u, n := replyOf(e)
			if errno != -int32(tc.errno) || u != unique {
				t.Fatalf("reply errno %d unique %d, want %d %d", errno, u, -int32(tc.errno), unique)
			}
			switch tc.opcode {
			case opRead:
				if n != int(binary.LittleEndian.Uint32(tc.op[16:])) || e.payload[0] != 3 || e.payload[5] != 8 {
					t.Fatalf("read reply of %d bytes starting %v", n, e.payload[:6])
				}
			case opWrite:
				got := try.got
				if !ok {
					got = plain.got
				}
				if !bytes.Equal(got, data) {
					t.Fatalf("the file system got %d bytes, not the %d written", len(got), len(data))
				}
			}
		})
	}
}
