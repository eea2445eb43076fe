package fuseuring

import (
	"encoding/binary"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// testTransport serves fsys (nil: an empty go-fuse node tree) from one
// entry.
func testTransport(t testing.TB, fsys fuse.RawFileSystem) (*Transport, *entry) {
	t.Helper()
	if fsys == nil {
		fsys = fs.NewNodeFS(&fs.Inode{}, &fs.Options{})
	}
	ps := fuse.NewProtocolServer(fsys, &fuse.MountOptions{MaxWrite: 1 << 16})
	if err := Init(ps, &fuse.InitIn{Major: 7, Minor: 41, MaxReadAhead: 1 << 16}); err != nil {
		t.Fatal(err)
	}
	e, err := newEntry(1 << 16)
	if err != nil {
		t.Fatal(err)
	}
	return &Transport{ps: ps, opts: Options{Logger: discard()}}, e
}

// request lays a request out in e as the kernel does: fuse_in_header in
// in_out, the per-op struct in op_in, the rest in the payload.
func request(e *entry, opcode uint32, unique uint64, op, payload []byte) {
	clear(e.header)
	binary.LittleEndian.PutUint32(e.header[0:], uint32(inHeaderSize+len(op)+len(payload)))
	binary.LittleEndian.PutUint32(e.header[4:], opcode)
	binary.LittleEndian.PutUint64(e.header[8:], unique)
	binary.LittleEndian.PutUint64(e.header[16:], 1) // node id: the root
	copy(e.header[opInOff:], op)
	copy(e.payload, payload)
	binary.LittleEndian.PutUint64(e.header[entOff+8:], unique)
	binary.LittleEndian.PutUint32(e.header[entOff+16:], uint32(len(payload)))
}

func replyOf(e *entry) (errno int32, unique uint64, payload int) {
	return int32(binary.LittleEndian.Uint32(e.header[4:])), binary.LittleEndian.Uint64(e.header[8:]),
		int(binary.LittleEndian.Uint32(e.header[entOff+16:]))
}

// TestServeReplies: requests laid out as the kernel lays them out get the
// reply go-fuse gives, in the places the kernel reads it from.
func TestServeReplies(t *testing.T) {
	tr, e := testTransport(t, nil)
	getattrIn := make([]byte, 16) // fuse_getattr_in
	cases := []struct {
		name       string
		opcode     uint32
		op, pay    []byte
		wantErrno  syscall.Errno
		wantOutLen int // bytes after the out header
	}{
		// An empty tree: a root with attributes (fuse_attr_out)
		{"getattr of the root", 3, getattrIn, nil, 0, 104},
		// and no children (the name is the payload).
		{"lookup", 1, nil, []byte("name\x00"), syscall.ENOENT, 0},
		{"statfs", 17, nil, nil, 0, 80},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			unique := uint64(100 + i)
			request(e, tc.opcode, unique, tc.op, tc.pay)
			if id := tr.serve(e); id != unique {
				t.Fatalf("commit id %d, want %d", id, unique)
			}
			errno, u, n := replyOf(e)
			if u != unique || errno != -int32(tc.wantErrno) || n != tc.wantOutLen {
				t.Fatalf("reply unique %d errno %d payload %d, want %d %d %d", u, errno, n, unique, -int32(tc.wantErrno), tc.wantOutLen)
			}
		})
	}
}

// TestServeMalformed: a header whose lengths do not add up is answered
// EIO, not served.
func TestServeMalformed(t *testing.T) {
	tr, e := testTransport(t, nil)
	request(e, 3, 7, make([]byte, 16), nil)
	binary.LittleEndian.PutUint32(e.header[0:], 20) // shorter than its header
	tr.serve(e)
	if errno, u, n := replyOf(e); errno != -int32(syscall.EIO) || u != 7 || n != 0 {
		t.Fatalf("reply errno %d unique %d payload %d, want EIO for 7, no payload", errno, u, n)
	}
}

// FuzzServe feeds arbitrary ring entries to serve (READs and WRITEs to
// tryInline first, as the queues do): it must not panic, and
// its reply must name the request and fit the entry. The file system
// behind is stateless (every operation ENOSYS): what is fuzzed is the
// decoding, in serve and go-fuse's parser, not go-fuse's node bookkeeping,
// which trusts the kernel (a FORGET of a node never looked up panics).
func FuzzServe(f *testing.F) {
	f.Add(uint32(3), uint32(56), uint32(0), make([]byte, 16), []byte{})
	f.Add(uint32(1), uint32(45), uint32(5), []byte{}, []byte("name\x00"))
	f.Add(uint32(16), uint32(120), uint32(40), make([]byte, 40), make([]byte, 40))
	tr, e := testTransport(f, fuse.NewDefaultRawFileSystem())
	tr.opts.Try, tr.opts.InlineMax = tr.ps, 1<<20 // READ and WRITE go through tryInline first
	f.Fuzz(func(t *testing.T, opcode, length, payloadSz uint32, op, payload []byte) {
		op = op[:min(len(op), opInSize)]
		payload = payload[:min(len(payload), len(e.payload))]
		request(e, opcode, 42, op, payload)
		binary.LittleEndian.PutUint32(e.header[0:], length)
		binary.LittleEndian.PutUint32(e.header[entOff+16:], payloadSz)
		if _, ok := tr.tryInline(e); !ok {
			tr.serve(e)
		}
		errno, u, n := replyOf(e)
		if u != 42 {
			t.Fatalf("reply (errno %d) for unique %d, want 42", errno, u)
		}
		if errno > 0 || n < 0 || n > len(e.payload) {
			t.Fatalf("reply errno %d payload %d", errno, n)
		}
	})
}
