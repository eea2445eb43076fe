package metarpc

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"

	"poolfs/internal/meta"
	"poolfs/internal/rpc"
)

// The hottest calls of a mount (Getattr, Lookup, CreateAttr, UnlinkAttr)
// carry their arguments and results as binary bodies instead of JSON:
// varints and length-prefixed strings, attributes in meta's wire encoding
// (meta.AppendAttr). The decoders below are fuzzed (wire_test.go).

// wireReader decodes arguments; the first error sticks.
type wireReader struct {
	b   []byte
	err error
}

func (r *wireReader) uv(max uint64) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 || v > max {
		r.err = fmt.Errorf("%w: bad varint in arguments", meta.ErrInvalid)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *wireReader) u32() uint32 { return uint32(r.uv(math.MaxUint32)) }

func (r *wireReader) str() string {
	n := r.uv(math.MaxInt32)
	if r.err == nil && n > uint64(len(r.b)) {
		r.err = fmt.Errorf("%w: string longer than the arguments", meta.ErrInvalid)
	}
	if r.err != nil {
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

// rest returns the remaining bytes as a string.
func (r *wireReader) rest() string {
	s := string(r.b)
	r.b = nil
	return s
}

func appendStr(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

func encodeIno(ino meta.Ino) []byte { return binary.AppendUvarint(nil, uint64(ino)) }

func decodeIno(b []byte) (meta.Ino, error) {
	r := wireReader{b: b}
	ino := meta.Ino(r.uv(math.MaxUint64))
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%w: trailing bytes in arguments", meta.ErrInvalid)
	}
	return ino, r.err
}

// entry: parent, then the name (the rest of the body).
func encodeEntry(parent meta.Ino, name string) []byte {
	return append(binary.AppendUvarint(nil, uint64(parent)), name...)
}

func decodeEntry(b []byte) (meta.Ino, string, error) {
	r := wireReader{b: b}
	p := meta.Ino(r.uv(math.MaxUint64))
	return p, r.rest(), r.err
}

// create: parent, type, mode, uid, gid, rdev, open, name, then the target
// (the rest of the body).
func encodeCreate(in meta.CreateArgs) []byte {
	b := binary.AppendUvarint(make([]byte, 0, 32+len(in.Name)+len(in.Target)), uint64(in.Parent))
	for _, v := range []uint32{uint32(in.Type), in.Mode, in.Uid, in.Gid, in.Rdev} {
		b = binary.AppendUvarint(b, uint64(v))
	}
	open := uint64(0)
	if in.Open {
		open = 1
	}
	b = binary.AppendUvarint(b, open)
	b = appendStr(b, in.Name)
	return append(b, in.Target...)
}

func decodeCreate(b []byte) (meta.CreateArgs, error) {
	r := wireReader{b: b}
	var in meta.CreateArgs
	in.Parent = meta.Ino(r.uv(math.MaxUint64))
	in.Type = meta.FileType(r.uv(math.MaxUint8))
	in.Mode, in.Uid, in.Gid, in.Rdev = r.u32(), r.u32(), r.u32(), r.u32()
	in.Open = r.uv(1) == 1
	in.Name = r.str()
	in.Target = r.rest()
	return in, r.err
}

func decodeAttrs(b []byte, n int) ([]meta.Attr, error) {
	out := make([]meta.Attr, n)
	for i := range out {
		var err error
		if out[i], b, err = meta.DecodeAttr(b); err != nil {
			return nil, fmt.Errorf("%w: %v", rpc.ErrProtocol, err)
		}
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%w: trailing bytes after attributes", rpc.ErrProtocol)
	}
	return out, nil
}

// handleWire registers a method with binary arguments and result.
func handleWire(s *rpc.Server, name string, f func(ctx context.Context, args []byte) ([]byte, error)) {
	s.Handle(name, func(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
		b, err := f(ctx, req.Body)
		if err != nil {
			return nil, err
		}
		return &rpc.Response{Body: b}, nil
	})
}

// registerWire exposes the binary calls of st.
func registerWire(s *rpc.Server, st *meta.Store) {
	handleWire(s, "meta.Getattr", func(ctx context.Context, b []byte) ([]byte, error) {
		ino, err := decodeIno(b)
		if err != nil {
			return nil, err
		}
		a, err := st.Getattr(ctx, ino)
		return meta.AppendAttr(nil, a), err
	})
	handleWire(s, "meta.Lookup", func(ctx context.Context, b []byte) ([]byte, error) {
		p, name, err := decodeEntry(b)
		if err != nil {
			return nil, err
		}
		a, err := st.Lookup(ctx, p, name)
		return meta.AppendAttr(nil, a), err
	})
	handleWire(s, "meta.CreateAttr", func(ctx context.Context, b []byte) ([]byte, error) {
		in, err := decodeCreate(b)
		if err != nil {
			return nil, err
		}
		c, p, err := st.CreateAttr(ctx, in)
		return meta.AppendAttr(meta.AppendAttr(nil, c), p), err
	})
	handleWire(s, "meta.UnlinkAttr", func(ctx context.Context, b []byte) ([]byte, error) {
		p, name, err := decodeEntry(b)
		if err != nil {
			return nil, err
		}
		a, err := st.UnlinkAttr(ctx, p, name)
		return meta.AppendAttr(nil, a), err
	})
}

func (c *Client) callWire(ctx context.Context, method string, args []byte, n int) ([]meta.Attr, error) {
	b, err := c.rc.CallBody(ctx, method, nil, args, nil, nil)
	if err != nil {
		return nil, err
	}
	return decodeAttrs(b, n)
}

// Getattr returns an inode's attributes.
func (c *Client) Getattr(ctx context.Context, ino meta.Ino) (meta.Attr, error) {
	a, err := c.callWire(ctx, "meta.Getattr", encodeIno(ino), 1)
	if err != nil {
		return meta.Attr{}, err
	}
	return a[0], nil
}

// Lookup resolves one name in a directory.
func (c *Client) Lookup(ctx context.Context, parent meta.Ino, name string) (meta.Attr, error) {
	a, err := c.callWire(ctx, "meta.Lookup", encodeEntry(parent, name), 1)
	if err != nil {
		return meta.Attr{}, err
	}
	return a[0], nil
}

// CreateAttr creates (and optionally opens) an inode and returns its
// attributes and its parent's (see meta.Store.CreateAttr).
func (c *Client) CreateAttr(ctx context.Context, in meta.CreateArgs) (child, parent meta.Attr, err error) {
	a, err := c.callWire(ctx, "meta.CreateAttr", encodeCreate(in), 2)
	if err != nil {
		return meta.Attr{}, meta.Attr{}, err
	}
	return a[0], a[1], nil
}

// UnlinkAttr unlinks and returns the parent's new attributes (see
// meta.Store.UnlinkAttr).
func (c *Client) UnlinkAttr(ctx context.Context, parent meta.Ino, name string) (meta.Attr, error) {
	a, err := c.callWire(ctx, "meta.UnlinkAttr", encodeEntry(parent, name), 1)
	if err != nil {
		return meta.Attr{}, err
	}
	return a[0], nil
}
