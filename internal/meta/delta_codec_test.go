package meta

import (
	"errors"
	"reflect"
	"testing"
)

// group returns n extents of stripe 3, sequence 9, in log stripe 1 over
// generation 40, 4 KiB each, every other 4 KiB of the stripe.
func group(n int) []Delta {
	ds := make([]Delta, n)
	for i := range ds {
		ds[i] = Delta{Stripe: 3, Seq: 9, Off: uint32(8192 * i), Len: 4096, Log: LogStripeBase + 1, LogOff: uint32(4096 * i), BaseGen: 40}
	}
	return ds
}

func FuzzDecodeDelta(f *testing.F) {
	f.Add(encodeDeltas(7, []Delta{{Stripe: 3, Seq: 9, Off: 4096, Len: 65536, Log: LogStripeBase | 12345, LogOff: 1 << 20, BaseGen: 1 << 40}}))
	f.Add(encodeDeltas(7, group(3)))
	f.Add([]byte{1, 0, 1, 0x80, 0, 0, 0, 0, 0})
	f.Add([]byte{2, 0x80, 1, 1, 2, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		ds, err := decodeDeltas(nil, 7, 3, 9, b)
		if err != nil {
			if len(ds) != 0 {
				t.Fatalf("%d extents with %v", len(ds), err)
			}
			return
		}
		if len(ds) == 0 || len(ds) > maxDeltaGroup {
			t.Fatalf("%d extents", len(ds))
		}
		for _, d := range ds {
			if d.Stripe != 3 || d.Seq != 9 {
				t.Fatal("stripe and seq not from key")
			}
			if d.Len == 0 || !IsLogStripe(d.Log) || d.Log != ds[0].Log || d.BaseGen != ds[0].BaseGen {
				t.Fatalf("accepted %+v in %+v", d, ds)
			}
		}
		if d2, err := decodeDeltas(nil, 7, 3, 9, encodeDeltas(7, ds)); err != nil || !reflect.DeepEqual(ds, d2) {
			t.Fatalf("round trip: %+v != %+v (%v)", d2, ds, err)
		}
	})
}

// TestDeltaRecordChecksum: a delta record read under another key, or
// damaged, is ErrCorrupt, never other extents; one extent and a group
// alike.
func TestDeltaRecordChecksum(t *testing.T) {
	for _, ds := range [][]Delta{
		{{Stripe: 3, Seq: 9, Off: 10, Len: 20, Log: LogStripeBase + 1, LogOff: 30, BaseGen: 40}},
		group(2),
		group(maxDeltaGroup),
	} {
		b := encodeDeltas(7, ds)
		prev := []Delta{{Stripe: 2}}
		if got, err := decodeDeltas(prev, 7, 3, 9, b); err != nil || !reflect.DeepEqual(got, append(prev, ds...)) {
			t.Fatalf("decode of %d: %+v, %v", len(ds), got, err)
		}
		for _, c := range []struct {
			name        string
			ino         Ino
			stripe, seq uint64
			flip        int
		}{{"other inode", 8, 3, 9, -1}, {"other stripe", 7, 4, 9, -1}, {"other seq", 7, 3, 10, -1}, {"damaged", 7, 3, 9, 2}, {"damaged end", 7, 3, 9, len(b) - 6}} {
			bb := append([]byte(nil), b...)
			if c.flip >= 0 {
				bb[c.flip] ^= 1
			}
			if got, err := decodeDeltas(prev, c.ino, c.stripe, c.seq, bb); !errors.Is(err, ErrCorrupt) || len(got) != 1 {
				t.Errorf("%d extents, %s: err = %v, %d extents out, want ErrCorrupt and the one before", len(ds), c.name, err, len(got))
			}
		}
	}
}

// TestDeltaGroupBounds: a group record of more than maxDeltaGroup
// extents, of fewer than 2, or with a bad extent does not decode.
func TestDeltaGroupBounds(t *testing.T) {
	big := group(maxDeltaGroup + 1)
	var e enc
	e.byte1(deltaGroupV2)
	e.uv(big[0].Log)
	e.uv(big[0].BaseGen)
	e.uv(uint64(len(big)))
	for _, d := range big {
		e.uv(uint64(d.Off))
		e.uv(uint64(d.Len))
		e.uv(uint64(d.LogOff))
	}
	seal := func(body []byte) []byte { return append(body, be32(deltaCRC(7, 3, 9, body))...) }
	var one enc // a group record of one extent
	one.byte1(deltaGroupV2)
	one.uv(big[0].Log)
	one.uv(big[0].BaseGen)
	one.uv(1)
	one.uv(0)
	one.uv(4096)
	one.uv(0)
	zero := group(3)
	zero[1].Len = 0
	var ok enc // as "one", with two extents: it decodes
	ok.byte1(deltaGroupV2)
	ok.uv(big[0].Log)
	ok.uv(big[0].BaseGen)
	ok.uv(2)
	for _, x := range []uint64{0, 4096, 0, 8192, 4096, 4096} {
		ok.uv(x)
	}
	if ds, err := decodeDeltas(nil, 7, 3, 9, seal(ok.b)); err != nil || len(ds) != 2 || ds[1].Off != 8192 || ds[1].LogOff != 4096 {
		t.Fatalf("a group of two made by hand: %+v, %v", ds, err)
	}
	for name, b := range map[string][]byte{
		"too many":     seal(e.b),
		"one":          seal(one.b),
		"empty extent": encodeDeltas(7, zero),
	} {
		if ds, err := decodeDeltas(nil, 7, 3, 9, b); !errors.Is(err, ErrCorrupt) || len(ds) != 0 {
			t.Errorf("%s: %d extents, %v", name, len(ds), err)
		}
	}
}

func be32(v uint32) []byte { return []byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)} }
