package placement

import "testing"

func benchPGDrives(b *testing.B, n int) {
	p := withDomains(newPool(8, 2, n), n/10, 10)
	pl, err := p.Placer()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := pl.PGDrives(uint32(i % p.PGs)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPGDrives60 places one PG of 8+2 on 60 drives in 6 servers.
func BenchmarkPGDrives60(b *testing.B) { benchPGDrives(b, 60) }

// BenchmarkPGDrives240 places one PG of 8+2 on 240 drives in 24 servers.
func BenchmarkPGDrives240(b *testing.B) { benchPGDrives(b, 240) }

// BenchmarkPGDrives240Weighted is BenchmarkPGDrives240 with unequal weights
// (one logarithm per drive).
func BenchmarkPGDrives240Weighted(b *testing.B) {
	p := withWeights(newPool(8, 2, 240), 1, 1.5)
	pl, err := p.Placer()
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; b.Loop(); i++ {
		if _, err := pl.PGDrives(uint32(i % p.PGs)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPoolPGDrives240 includes compiling the pool on every call.
func BenchmarkPoolPGDrives240(b *testing.B) {
	p := withDomains(newPool(8, 2, 240), 24, 10)
	for i := 0; b.Loop(); i++ {
		if _, err := p.PGDrives(uint32(i % p.PGs)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMap240 computes every PG (DefaultPGs = 65536) of 8+2 on 240 drives
// in 24 servers.
func BenchmarkMap240(b *testing.B) {
	p := withDomains(newPool(8, 2, 240), 24, 10)
	for b.Loop() {
		if _, err := p.Map(); err != nil {
			b.Fatal(err)
		}
	}
}
