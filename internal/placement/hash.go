package placement

import (
	"math"
	"math/bits"
)

// The hashes below are fixed forever: every map ever computed depends on
// them. They are splitmix64 (Steele, Lea, Flood 2014), hand-written so that
// the result is the same in every process, build and architecture
// (hash/maphash is seeded per process and must not be used here).

const golden = 0x9e3779b97f4a7c15 // 2^64 / φ, the splitmix64 increment

// Domain-separation seeds, so that the stripe hash and the straw2 hash of
// equal numbers are unrelated.
const (
	seedStripe = 0x5ca1ab1e0ddba11
	seedStraw2 = 0x57a3a3bd2c0ffee
)

// mix64 is the splitmix64 finalizer: a bijection on uint64 with full
// avalanche.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// PGOf returns the placement group of stripe `stripe` of file `ino` in pool
// poolID: a uniform hash of the three values reduced to [0, pgs). Consecutive
// stripes of a file land on unrelated PGs. pgs must be > 0 (PGOf panics
// otherwise: that is a caller bug, like a division by zero).
func PGOf(poolID uint32, ino, stripe uint64, pgs int) uint32 {
	if pgs <= 0 {
		panic("placement: PGOf with pgs <= 0")
	}
	h := mix64(seedStripe ^ uint64(poolID))
	h = mix64(h ^ ino)
	h = mix64(h + golden ^ stripe)
	hi, _ := bits.Mul64(h, uint64(pgs)) // Lemire's reduction: floor(h*pgs/2^64)
	return uint32(hi)
}

// pgSeed returns the per-PG base of the straw2 hash.
func pgSeed(poolID, pg uint32) uint64 {
	return mix64(mix64(seedStraw2^uint64(poolID)) + uint64(pg)*golden)
}

// straw2Draw returns drive id's straw for the PG whose pgSeed is base:
// ln(u)/weight with u in (0, 1] from a hash of (poolID, pg, id). The draw is
// an exponential race: a drive of twice the weight wins twice as often, and
// the draw of one drive never depends on any other drive.
func straw2Draw(base uint64, id DriveID, invWeight float64) float64 {
	return math.Log(straw2U(base, id)) * invWeight
}

// straw2Uniform ranks drives exactly as straw2Draw does when all weights are
// equal (ln(u)/w is increasing in u), at a fraction of the cost.
func straw2Uniform(base uint64, id DriveID) float64 { return straw2U(base, id) }

// straw2U returns u in (0, 1] from a hash of the PG's base and the drive ID:
// the splitmix64 stream seeded by base, at index id.
func straw2U(base uint64, id DriveID) float64 {
	h := mix64(base + (uint64(id)+1)*golden)
	return float64(h>>11+1) * (1.0 / (1 << 53))
}
