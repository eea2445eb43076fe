package plan

import (
	"errors"
	"testing"

	"poolfs/internal/placement"
)

// TestCapacityIdentities checks that every byte of raw capacity is
// accounted for once and that usable and parity keep the scheme's ratio.
func TestCapacityIdentities(t *testing.T) {
	const tib = int64(1) << 40
	for _, tc := range []struct {
		name       string
		pool       Pool
		unused     int64 // drives left over by the grouped layout
		spareDrive int64 // preservation in drives (grouped: hot spares)
	}{
		{"60 declustered 8+2", Pool{Drives: 60, DriveBytes: 16 * tib, K: 8, M: 2}, 0, 3},
		{"60 grouped 8+2: 5 groups, 3 spares, 7 unused", Pool{Drives: 60, DriveBytes: 16 * tib, K: 8, M: 2, Layout: placement.Grouped}, 7, 3},
		{"50 grouped 4+2 with 2 spares (reference 001's RAID-6)", Pool{Drives: 50, DriveBytes: 300e9, K: 4, M: 2, Layout: placement.Grouped, Preservation: 2}, 0, 2},
		{"3-way mirror", Pool{Drives: 12, DriveBytes: 4 * tib, K: 1, M: 2, Preservation: -1}, 0, 0},
		{"5000 declustered 16+3", Pool{Drives: 5000, DriveBytes: 20 * tib, K: 16, M: 3}, 0, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := CapacityOf(tc.pool)
			if err != nil {
				t.Fatal(err)
			}
			if sum := c.Usable + c.Parity + c.Preservation + c.Unused; sum != c.Raw {
				t.Errorf("usable %d + parity %d + preservation %d + unused %d = %d, raw %d", c.Usable, c.Parity, c.Preservation, c.Unused, sum, c.Raw)
			}
			if c.Raw != int64(tc.pool.Drives)*tc.pool.DriveBytes {
				t.Errorf("raw %d, want %d drives of %d", c.Raw, tc.pool.Drives, tc.pool.DriveBytes)
			}
			if c.Unused != tc.unused*tc.pool.DriveBytes {
				t.Errorf("unused %d, want %d drives", c.Unused, tc.unused)
			}
			// Usable : parity = k : m, to the rounding of one stripe.
			want := float64(tc.pool.K) / float64(tc.pool.K+tc.pool.M)
			if got := float64(c.Usable) / float64(c.Usable+c.Parity); got < want-1e-6 || got > want+1e-6 {
				t.Errorf("usable share of data+parity %.6f, want %.6f", got, want)
			}
			// Preservation is at least the spare drives (declustered pools also
			// keep room for each drive's imbalance).
			if lo, hi := tc.spareDrive*tc.pool.DriveBytes, (tc.spareDrive+1)*tc.pool.DriveBytes+c.Raw/50; c.Preservation < lo || c.Preservation > hi {
				t.Errorf("preservation %d, want about %d drives (%d..%d)", c.Preservation, tc.spareDrive, lo, hi)
			}
		})
	}
}

func TestCapacityRejectsBadPools(t *testing.T) {
	for _, p := range []Pool{
		{Drives: 9, DriveBytes: 1 << 40, K: 8, M: 2},
		{Drives: 12, DriveBytes: 1 << 40, K: 8, M: 2, Layout: placement.Grouped, Preservation: 3},
		{Drives: 60, DriveBytes: 0, K: 8, M: 2},
		{Drives: 60, DriveBytes: 1 << 40, K: 0, M: 2},
	} {
		if _, err := CapacityOf(p); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: err %v, want ErrInvalid", p, err)
		}
	}
}
