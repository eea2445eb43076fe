package metarpc

import (
	"reflect"
	"testing"

	"poolfs/internal/meta"
)

// Native fuzz tests for the decoders of binary call arguments: they never
// panic, and what they accept survives an encode/decode round trip.

func FuzzDecodeCreate(f *testing.F) {
	f.Add(encodeCreate(meta.CreateArgs{Parent: 1, Name: "f", Type: meta.TypeFile, Mode: 0644, Open: true}))
	f.Add(encodeCreate(meta.CreateArgs{Parent: 1 << 40, Name: "l", Type: meta.TypeSymlink, Mode: 0777, Uid: 1000, Target: "a/b"}))
	f.Add([]byte{1, 1, 0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		in, err := decodeCreate(b)
		if err != nil {
			return
		}
		in2, err := decodeCreate(encodeCreate(in))
		if err != nil || !reflect.DeepEqual(in, in2) {
			t.Fatalf("round trip: %+v != %+v (%v)", in2, in, err)
		}
	})
}

func FuzzDecodeEntry(f *testing.F) {
	f.Add(encodeEntry(1, "name"))
	f.Add(encodeIno(7))
	f.Add([]byte{0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		if ino, err := decodeIno(b); err == nil {
			if ino2, err := decodeIno(encodeIno(ino)); err != nil || ino2 != ino {
				t.Fatalf("ino round trip: %d != %d (%v)", ino2, ino, err)
			}
		}
		p, name, err := decodeEntry(b)
		if err != nil {
			return
		}
		p2, name2, err := decodeEntry(encodeEntry(p, name))
		if err != nil || p2 != p || name2 != name {
			t.Fatalf("entry round trip: %d %q != %d %q (%v)", p2, name2, p, name, err)
		}
	})
}

func TestDecodeAttrs(t *testing.T) {
	a := meta.Attr{Ino: 5, Type: meta.TypeFile, Mode: 0600, Nlink: 1, Size: 3}
	got, err := decodeAttrs(meta.AppendAttr(nil, a), 1)
	if err != nil || !reflect.DeepEqual(got[0], a) {
		t.Fatalf("decodeAttrs = %+v, %v", got, err)
	}
	if _, err := decodeAttrs(append(meta.AppendAttr(nil, a), 0), 1); err == nil {
		t.Fatal("trailing byte accepted")
	}
}
