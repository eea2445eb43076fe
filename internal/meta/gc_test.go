package meta_test

import (
	"maps"
	"testing"

	"poolfs/internal/meta"
)

func TestGCItemBytes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		items []meta.GCItem
		want  map[uint32]int64
	}{
		{"empty", nil, map[uint32]int64{}},
		{"one stripe", []meta.GCItem{{Drives: []uint32{3, 4, 5}, ShardSize: 100}}, map[uint32]int64{3: 100, 4: 100, 5: 100}},
		{"fragments on no drive", []meta.GCItem{{Drives: []uint32{meta.NoDrive, 4, meta.NoDrive}, ShardSize: 7}}, map[uint32]int64{4: 7}},
		{"drives summed over items", []meta.GCItem{
			{Drives: []uint32{1, 2}, ShardSize: 10},
			{Drives: []uint32{2, 3}, ShardSize: 1 << 20},
			{Drives: []uint32{2}, ShardSize: 5},
		}, map[uint32]int64{1: 10, 2: 10 + 1<<20 + 5, 3: 1 << 20}},
	} {
		if got := meta.GCItemBytes(tc.items); !maps.Equal(got, tc.want) {
			t.Errorf("%s: GCItemBytes = %v, want %v", tc.name, got, tc.want)
		}
	}
}
