package chunkstore

import (
	"math"
	"testing"

	"poolfs/internal/erasure"
)

func TestFragName(t *testing.T) {
	for _, k := range []erasure.FragmentKey{
		{},
		{Ino: 0xabc, Stripe: 12, Gen: 0xff, Index: 9},
		{Ino: math.MaxUint64, Stripe: math.MaxUint64, Gen: math.MaxUint64, Index: 255},
	} {
		name := fragName(k)
		got, ok := parseFragName(name)
		if !ok || got != k {
			t.Errorf("%q: parsed %v %v, want %v", name, got, ok, k)
		}
	}
	for _, bad := range []string{"", "1.2.3", "1.2.3.4.5", "01.2.3.4", "A.2.3.4", "1.2.3.256",
		"1.2.3.04", "+1.2.3.4", "1.-2.3.4", "0x1.2.3.4", "1..3.4", "1.2.3.4 ", "tmp-1.2.3.4-5", "1.a.3.4"} {
		if k, ok := parseFragName(bad); ok {
			t.Errorf("%q accepted as %v", bad, k)
		}
	}
}

func TestFanoutSpread(t *testing.T) {
	const run = 1 << stripeRun
	// Consecutive stripes of a run share a directory.
	for s := uint64(0); s < run; s++ {
		if a, b := fanout(erasure.FragmentKey{Ino: 42, Stripe: s}), fanout(erasure.FragmentKey{Ino: 42}); a != b {
			t.Fatalf("stripe %d in dir %02x, stripe 0 in %02x", s, a, b)
		}
	}
	// The runs of one huge file spread over every directory.
	var runs [fanoutDirs]int
	for r := range uint64(4096) {
		runs[fanout(erasure.FragmentKey{Ino: 42, Stripe: r * run})]++
	}
	for i, c := range runs {
		if c < 4 || c > 32 {
			t.Fatalf("dir %02x holds %d of 4096 runs of one file (mean 16)", i, c)
		}
	}
	// Different files spread too.
	var files [fanoutDirs]int
	for ino := range uint64(4096) {
		files[fanout(erasure.FragmentKey{Ino: ino})]++
	}
	for i, c := range files {
		if c < 4 || c > 32 {
			t.Fatalf("dir %02x holds %d of 4096 files (mean 16)", i, c)
		}
	}
}

func FuzzParseFragName(f *testing.F) {
	for _, s := range []string{"1.2.3.4", "ffffffffffffffff.18446744073709551615.0.255", "tmp-1.2.3.4-1", "..", "1.2.3.4.", "00.0.0.0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		k, ok := parseFragName(name)
		if !ok {
			return
		}
		if fragName(k) != name {
			t.Fatalf("%q parsed as %v which formats as %q", name, k, fragName(k))
		}
		if _, ok := parseFragPath(fanout(k), name); !ok {
			t.Fatalf("%q rejected in its own fanout dir", name)
		}
	})
}
