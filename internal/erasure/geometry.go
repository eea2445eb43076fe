package erasure

import "fmt"

const (
	// Align is the alignment of every on-disk offset and length of a
	// fragment, so that fragments can be read and written with O_DIRECT.
	Align = 4096

	// MaxShards bounds k+m: shard indices, k and m are stored in one byte
	// each, and GF(2^8) Reed-Solomon supports at most 256 shards.
	MaxShards = 256

	// MaxShardSize bounds the shard size S (and so the stripe unit).
	MaxShardSize = 64 << 20
)

// ValidateGeometry checks an erasure scheme k+m with stripe unit unit: k >= 1,
// m >= 0, k+m <= MaxShards, and unit a positive multiple of Align no larger
// than MaxShardSize. Layout configuration should call it before using the
// other functions of this package, which assume a valid geometry.
func ValidateGeometry(k, m, unit int) error {
	switch {
	case k < 1 || m < 0 || k+m > MaxShards:
		return fmt.Errorf("erasure: invalid scheme %d+%d (need k >= 1, m >= 0, k+m <= %d)", k, m, MaxShards)
	case unit <= 0 || unit%Align != 0 || unit > MaxShardSize:
		return fmt.Errorf("erasure: invalid stripe unit %d (need a positive multiple of %d up to %d)", unit, Align, MaxShardSize)
	}
	return nil
}

// ShardSize returns the size S of every shard of a stripe holding L user
// bytes with k data shards of stripe unit unit. A full stripe (L == k*unit)
// has S = unit; a shorter one has S = roundup(ceil(L/k), Align), capped at
// unit, so that small files do not pay for full units (a 1-byte file has
// 4 KiB shards). User byte o of the stripe lives in data shard o/S at offset
// o%S. ShardSize panics unless 1 <= L <= k*unit.
func ShardSize(L, k, unit int) int {
	if k < 1 || L < 1 || L > k*unit {
		panic(fmt.Sprintf("erasure: ShardSize(%d, %d, %d): need 1 <= L <= k*unit", L, k, unit))
	}
	if L == k*unit {
		return unit
	}
	return min(roundUp((L+k-1)/k, Align), unit)
}

// Join appends the first L user bytes held by the data shards to dst and
// returns the extended slice. The data shards must all be present and of
// equal size S with L <= k*S; shards may hold only the k data shards.
func Join(dst []byte, shards [][]byte, k, L int) []byte {
	for _, s := range shards[:k] {
		if L <= 0 {
			break
		}
		n := min(len(s), L)
		dst = append(dst, s[:n]...)
		L -= n
	}
	if L > 0 {
		panic(fmt.Sprintf("erasure: Join: %d bytes short", L))
	}
	return dst
}

func roundUp(n, to int) int { return (n + to - 1) / to * to }
