package clustermap

import "testing"

func TestRebuildPolicyAt(t *testing.T) {
	tests := []struct {
		level, n, k   int
		depth, most   int
		share         float64
		wantIdleWhole bool // idle drives are taken whole: no small pool-wide cap
	}{
		{0, 60, 8, 1, 1, 0.1, false},
		{1, 60, 8, 1, 3, 0.25, false},
		{2, 60, 8, 8, 48, 0.4, true},
		{3, 60, 8, 8, 48, 0.7, true},
		{4, 60, 8, 8, 48, 1, true},
		{2, 1000, 8, 8, 445, 0.4, true}, // four tasks per drive: grows with the pool
		{4, 5000, 8, 8, 2223, 1, true},
		{-3, 12, 8, 1, 1, 0.1, false}, // clamped to lowest
		{9, 12, 8, 8, 48, 1, true},    // clamped to highest
	}
	for _, tt := range tests {
		p := RebuildPolicyAt(tt.level, tt.n, tt.k)
		if p.Depth != tt.depth || p.MaxTasks != tt.most || p.BusyShare != tt.share {
			t.Errorf("RebuildPolicyAt(%d, %d, %d) = %+v, want depth %d, max %d, share %g",
				tt.level, tt.n, tt.k, p, tt.depth, tt.most, tt.share)
		}
		// Enough tasks in flight to give every drive of the pool its next
		// rebuild I/O, when idle drives are to be taken whole.
		if whole := p.MaxTasks*(tt.k+1) >= 4*tt.n; whole != tt.wantIdleWhole && tt.n >= 60 {
			t.Errorf("level %d on %d drives: %d tasks in flight, idle drives taken whole = %v, want %v",
				tt.level, tt.n, p.MaxTasks, whole, tt.wantIdleWhole)
		}
	}
	for lvl := 1; lvl < len(Priorities); lvl++ {
		if RebuildPolicyAt(lvl, 60, 8).BusyShare <= RebuildPolicyAt(lvl-1, 60, 8).BusyShare {
			t.Errorf("priority %s does not give rebuild more of a busy drive than %s", Priorities[lvl], Priorities[lvl-1])
		}
	}
}
