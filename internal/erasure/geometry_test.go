package erasure

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

func TestShardSize(t *testing.T) {
	const M = 1 << 20
	tests := []struct {
		name       string
		L, k, unit int
		want       int
	}{
		{"one byte", 1, 8, M, 4096},
		{"one byte k1", 1, 1, M, 4096},
		{"one 4K row", 8 * 4096, 8, M, 4096},
		{"one 4K row plus one", 8*4096 + 1, 8, M, 8192},
		{"full stripe", 8 * M, 8, M, M},
		{"full stripe minus one", 8*M - 1, 8, M, M},
		{"seven units plus one", 7*M + 1, 8, M, 921600},
		{"half stripe", 4 * M, 8, M, 512 << 10},
		{"full 4+2 stripe", 4 * M, 4, M, M},
		{"full 16 stripe 64K unit", 16 * 65536, 16, 65536, 65536},
		{"cap at odd unit", 19999, 2, 10000, 10000},
		{"full odd unit", 20000, 2, 10000, 10000},
		{"small unit tail", 3, 3, 4096, 4096},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ShardSize(tt.L, tt.k, tt.unit); got != tt.want {
				t.Errorf("ShardSize(%d, %d, %d) = %d, want %d", tt.L, tt.k, tt.unit, got, tt.want)
			}
		})
	}
}

func TestShardSizeInvariants(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		k := 1 + r.IntN(20)
		unit := Align * (1 + r.IntN(256))
		L := 1 + r.IntN(k*unit)
		S := ShardSize(L, k, unit)
		if S%Align != 0 || S > unit || k*S < L {
			t.Fatalf("ShardSize(%d, %d, %d) = %d breaks invariants", L, k, unit, S)
		}
		if S < unit && k*(S-Align) >= L {
			t.Fatalf("ShardSize(%d, %d, %d) = %d is not the smallest aligned size", L, k, unit, S)
		}
	}
}

func TestShardSizePanics(t *testing.T) {
	for _, L := range []int{0, -1, 8<<20 + 1} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("ShardSize(%d, 8, 1MiB) did not panic", L)
				}
			}()
			ShardSize(L, 8, 1<<20)
		}()
	}
}

func TestValidateGeometry(t *testing.T) {
	tests := []struct {
		k, m, unit int
		ok         bool
	}{
		{8, 2, 1 << 20, true},
		{1, 0, 4096, true},
		{255, 1, MaxShardSize, true},
		{0, 2, 4096, false},
		{8, -1, 4096, false},
		{200, 57, 4096, false},
		{8, 2, 0, false},
		{8, 2, 4095, false},
		{8, 2, MaxShardSize + Align, false},
	}
	for _, tt := range tests {
		if err := ValidateGeometry(tt.k, tt.m, tt.unit); (err == nil) != tt.ok {
			t.Errorf("ValidateGeometry(%d, %d, %d) = %v, want ok=%v", tt.k, tt.m, tt.unit, err, tt.ok)
		}
	}
}

func TestAlignedBuffer(t *testing.T) {
	for _, n := range []int{0, 1, 4096, 8192 + 17, 1 << 20} {
		b := AlignedBuffer(n)
		if len(b) != n || cap(b) != n {
			t.Errorf("AlignedBuffer(%d): len %d cap %d", n, len(b), cap(b))
		}
		if n > 0 && !IsAligned(b) {
			t.Errorf("AlignedBuffer(%d) not aligned", n)
		}
	}
}

func TestJoin(t *testing.T) {
	c := mustCodec(t, 4, 2)
	stripe := randBytes(rand.New(rand.NewPCG(3, 4)), 3*4096+5)
	S := ShardSize(len(stripe), 4, 1<<20)
	shards := make([][]byte, 6)
	c.Split(stripe, S, shards)
	if got := Join(nil, shards, 4, len(stripe)); !bytes.Equal(got, stripe) {
		t.Fatal("Join(Split(x)) != x")
	}
}
