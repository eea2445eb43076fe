package meta

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

// Native fuzz tests for every decoder of stored bytes: a decoder must never
// panic, and whatever it accepts must survive an encode/decode round trip
// unchanged (bytes may differ: varints have non-minimal forms).

func FuzzDecodeInode(f *testing.F) {
	f.Add(encodeInode(&inode{Attr: Attr{Type: TypeDir, Mode: 0755, Nlink: 2, Layout: Layout{K: 8, M: 2, Unit: 1 << 20}}, Parent: 1}))
	f.Add(encodeInode(&inode{Attr: Attr{Type: TypeSymlink, Mode: 0777, Target: "a/b", Atime: -1, Mtime: 1 << 60}}))
	f.Add(encodeInode(&inode{Attr: Attr{Type: TypeFile, Mode: 0o6755, Size: 1 << 40, Stored: 8 << 20}, clean: cleanNoXattrs | storedCounted}))
	f.Add([]byte{1, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := decodeInode(7, b)
		if err != nil {
			return
		}
		if n.Ino != 7 {
			t.Fatal("ino not from key")
		}
		if n2, err := decodeInode(7, encodeInode(&n)); err != nil || !reflect.DeepEqual(n, n2) {
			t.Fatalf("round trip: %+v != %+v (%v)", n2, n, err)
		}
	})
}

func FuzzDecodeDirent(f *testing.F) {
	f.Add(encodeDirent(12345, TypeFile))
	f.Add([]byte{0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		ino, typ, err := decodeDirent(b)
		if err != nil {
			return
		}
		if ino2, typ2, err := decodeDirent(encodeDirent(ino, typ)); err != nil || ino2 != ino || typ2 != typ {
			t.Fatal("round trip")
		}
	})
}

func FuzzDecodeStripe(f *testing.F) {
	f.Add(encodeStripe(5, &storedStripe{StripeRec: StripeRec{Gen: 3, PG: 9, Len: 100, ShardSize: 4096, Drives: []uint32{1, 2, 3}}, Pool: 2}))
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add(encodeStripe(5, &storedStripe{StripeRec: StripeRec{Gen: 4, PG: 1, Len: 10, ShardSize: 4096, Drives: []uint32{7, 8, 9}, K: 1}}))
	f.Add(encodeStripe(5, &storedStripe{StripeRec: StripeRec{Gen: 5, Len: 1 << 20, ShardSize: 1 << 18, Drives: []uint32{1, 2, 3, 4, 5, 6}, K: 4}, Pool: 1}))
	f.Add([]byte{2, 1, 0, 0, 0, 0, 1, 3, 2}) // K larger than the drives
	f.Add([]byte{2, 1, 0, 0, 0, 0, 1, 3, 0}) // K = 0 in format 2
	f.Add([]byte{2, 4, 1, 10, 0x80, 0x20, 0, 3, 7, 8, 9, 1})
	f.Add([]byte{3, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := decodeStripe(5, 5, b)
		if err != nil {
			return
		}
		if len(s.Drives) > MaxDrives {
			t.Fatalf("%d drives", len(s.Drives))
		}
		if s.K < 0 || s.K > len(s.Drives) || b[0] == codecV1 && s.K != 0 || b[0] == codecV2 && s.K == 0 {
			t.Fatalf("format %d decoded K=%d of %d drives", b[0], s.K, len(s.Drives))
		}
		if s2, err := decodeStripe(5, 5, encodeStripe(5, &s)); err != nil || !reflect.DeepEqual(s, s2) {
			t.Fatalf("round trip: %+v != %+v (%v)", s2, s, err)
		}
	})
}

// TestStripeRecordChecksum: records of formats 1 and 2 (written before
// records had a checksum) still decode; a format 3 record with any bit
// flipped, or read under another key, fails with ErrCorrupt.
func TestStripeRecordChecksum(t *testing.T) {
	want := storedStripe{StripeRec: StripeRec{Stripe: 1, Gen: 4, PG: 1, Len: 10, ShardSize: 4096, Drives: []uint32{7, 8, 9}, K: 1}}
	for name, b := range map[string][]byte{
		"format 2": {2, 4, 1, 10, 0x80, 0x20, 0, 3, 7, 8, 9, 1},
		"format 3": encodeStripe(12, &want),
	} {
		t.Run(name, func(t *testing.T) {
			got, err := decodeStripe(12, 1, b)
			if err != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("decode: %+v, %v; want %+v", got, err, want)
			}
		})
	}
	v1 := []byte{1, 4, 1, 10, 0x80, 0x20, 0, 3, 7, 8, 9}
	if got, err := decodeStripe(12, 1, v1); err != nil || got.K != 0 || got.Gen != 4 {
		t.Fatalf("format 1: %+v, %v", got, err)
	}
	b := encodeStripe(12, &want)
	for i := range b {
		for bit := 0; bit < 8; bit++ {
			c := append([]byte(nil), b...)
			c[i] ^= 1 << bit
			if _, err := decodeStripe(12, 1, c); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("byte %d bit %d flipped: %v, want ErrCorrupt", i, bit, err)
			}
		}
	}
	for _, k := range [][2]uint64{{13, 1}, {12, 2}} {
		if _, err := decodeStripe(Ino(k[0]), k[1], b); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("record of 12/1 read as %d/%d: %v", k[0], k[1], err)
		}
	}
}

func FuzzDecodeGC(f *testing.F) {
	f.Add(encodeGC(&GCItem{Ino: 5, Stripe: 1, Gen: 2, Drives: []uint32{NoDrive, 4}, ShardSize: 8}))
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := decodeGC(1, b)
		if err != nil {
			return
		}
		if g2, err := decodeGC(1, encodeGC(&g)); err != nil || !reflect.DeepEqual(g, g2) {
			t.Fatalf("round trip: %+v != %+v (%v)", g2, g, err)
		}
	})
}

func FuzzDecodeEvent(f *testing.F) {
	f.Add(encodeEvent(&Event{Time: 1, Duration: -5, Kind: "drive.failed", Subject: "d07", Message: "I/O errors"}))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := decodeEvent(1, b)
		if err != nil {
			return
		}
		if e2, err := decodeEvent(1, encodeEvent(&e)); err != nil || e2 != e {
			t.Fatalf("round trip: %+v != %+v (%v)", e2, e, err)
		}
	})
}

func FuzzDecodeCounterBlob(f *testing.F) {
	f.Add(encodeU64(42))
	f.Add(encodeBlob(3, []byte("map")))
	f.Fuzz(func(t *testing.T, b []byte) {
		if v, err := decodeU64(b); err == nil && !bytes.Equal(encodeU64(v), b) {
			t.Fatal("counter round trip")
		}
		if v, d, err := decodeBlob(b); err == nil && !bytes.Equal(encodeBlob(v, d), b) {
			t.Fatal("blob round trip")
		}
	})
}

func TestKeysOrder(t *testing.T) {
	if bytes.Compare(stripeKey(1, 255), stripeKey(1, 256)) >= 0 {
		t.Error("stripe keys not numerically ordered")
	}
	if bytes.Compare(direntKey(1, "a"), direntKey(1, "a\x01")) >= 0 || bytes.Compare(direntKey(1, "zzz"), direntKey(2, "")) >= 0 {
		t.Error("dirent keys not ordered")
	}
	if got := prefixEnd([]byte{1, 0xff}); !bytes.Equal(got, []byte{2}) {
		t.Errorf("prefixEnd = %x", got)
	}
	if prefixEnd([]byte{0xff, 0xff}) != nil {
		t.Error("prefixEnd of all-ff")
	}
}

func FuzzDecodeAttr(f *testing.F) {
	f.Add(AppendAttr(nil, Attr{Ino: 9, Type: TypeFile, Mode: 0644, Nlink: 1, Size: 5, Layout: Layout{K: 8, M: 2, Unit: 1 << 20}}))
	f.Add(AppendAttr(nil, Attr{Ino: 9, Type: TypeFile, Size: 10 << 30, Stored: 1 << 20}))
	f.Add(AppendAttr(AppendAttr(nil, Attr{Ino: 1, Type: TypeDir}), Attr{Ino: 2, Type: TypeSymlink, Target: "x"}))
	f.Add([]byte{1, 2, 1, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		a, rest, err := DecodeAttr(b)
		if err != nil {
			return
		}
		if len(rest) > len(b) {
			t.Fatal("rest longer than input")
		}
		a2, rest2, err := DecodeAttr(AppendAttr(nil, a))
		if err != nil || len(rest2) != 0 || !reflect.DeepEqual(a, a2) {
			t.Fatalf("round trip: %+v != %+v (%v)", a2, a, err)
		}
	})
}

// TestInodeCleanFlags: the clean flags are an optional trailing field, so
// records written before it existed decode with nothing known (every scan
// runs); a written 0 is rejected, so each inode has one encoding.
func TestInodeCleanFlags(t *testing.T) {
	for _, clean := range []uint8{0, cleanNoXattrs, cleanNoStripes, cleanAll} {
		n := inode{Attr: Attr{Ino: 9, Type: TypeFile, Mode: 0o644, Nlink: 1}, clean: clean}
		b := encodeInode(&n)
		got, err := decodeInode(9, b)
		if err != nil || got.clean != clean {
			t.Fatalf("clean %d: decoded %d, %v", clean, got.clean, err)
		}
	}
	old := encodeInode(&inode{Attr: Attr{Ino: 9, Type: TypeFile}})
	if _, err := decodeInode(9, append(old, 0)); err == nil {
		t.Fatal("a trailing clean field of 0 decoded")
	}
	if _, err := decodeInode(9, append(old, 8)); err == nil {
		t.Fatal("an unknown clean flag decoded")
	}
}

// TestInodeStored: Stored follows the flags when counted; a file written
// before the count existed reports its size (st_blocks as it was), one
// never given a stripe 0.
func TestInodeStored(t *testing.T) {
	base := Attr{Ino: 9, Type: TypeFile, Mode: 0o644, Nlink: 1, Size: 10 << 30}
	for _, c := range []struct {
		name  string
		clean uint8
		set   uint64
		want  uint64
	}{
		{"counted", cleanNoXattrs | storedCounted, 8 << 20, 8 << 20},
		{"counted zero", cleanAll | storedCounted, 0, 0},
		{"old record", 0, 0, 10 << 30},
		{"old record without stripes", cleanNoStripes, 0, 0},
	} {
		a := base
		a.Stored = c.set
		got, err := decodeInode(9, encodeInode(&inode{Attr: a, clean: c.clean}))
		if err != nil || got.Stored != c.want {
			t.Errorf("%s: Stored %d, %v; want %d", c.name, got.Stored, err, c.want)
		}
	}
	if _, err := decodeInode(9, append(encodeInode(&inode{Attr: base}), storedCounted)); err == nil {
		t.Fatal("a counted record without its count decoded")
	}
}

func FuzzDecodeDeltaSum(f *testing.F) {
	f.Add(encodeDeltaSum(7, 3, &DeltaSummary{Extents: 3, Bytes: 12288, LastSeq: 9,
		Logs: []LogLen{{LogStripeBase | 5, 1 << 20}, {LogStripeBase | 8, 4096}}}))
	f.Add([]byte{1, 1, 1, 1, 1, 0x80, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := decodeDeltaSum(7, 3, b)
		if err != nil {
			return
		}
		if s.Extents == 0 || len(s.Logs) == 0 || len(s.Logs) > s.Extents {
			t.Fatalf("accepted %+v", s)
		}
		for i, l := range s.Logs {
			if !IsLogStripe(l.Log) || i > 0 && l.Log <= s.Logs[i-1].Log {
				t.Fatalf("accepted log stripes %+v", s.Logs)
			}
		}
		if s2, err := decodeDeltaSum(7, 3, encodeDeltaSum(7, 3, &s)); err != nil || !reflect.DeepEqual(s, s2) {
			t.Fatalf("round trip: %+v != %+v (%v)", s2, s, err)
		}
		if _, err := decodeDeltaSum(7, 4, b); err == nil {
			t.Fatal("a summary decoded under another stripe's key")
		}
	})
}
