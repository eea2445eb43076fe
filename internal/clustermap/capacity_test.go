package clustermap

import (
	"testing"

	"poolfs/internal/placement"
)

func TestOnUp(t *testing.T) {
	m := testMap(4, 1, placement.Declustered)
	m.Drives[1].State = StateDown
	m.Drives[2].State = StateFailed
	for _, tc := range []struct {
		per             map[uint32]int64
		bytes, capacity int64
	}{
		{nil, 0, 2 << 30},
		{map[uint32]int64{0: 5, 3: 7}, 12, 2 << 30},
		{map[uint32]int64{1: 5, 2: 7, 3: 1}, 1, 2 << 30}, // down and failed drives do not count
		{map[uint32]int64{99: 5}, 0, 2 << 30},            // not in the map
	} {
		if b, c := m.OnUp(tc.per); b != tc.bytes || c != tc.capacity {
			t.Errorf("OnUp(%v) = %d, %d; want %d, %d", tc.per, b, c, tc.bytes, tc.capacity)
		}
	}
}
