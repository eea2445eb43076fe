package mgmt

import (
	"reflect"
	"testing"

	"poolfs/internal/chunkstore"
)

func TestHostSpaces(t *testing.T) {
	const gib = 1 << 30
	u := func(capacity, used, allocated, free int64, fs uint64) chunkstore.Usage {
		return chunkstore.Usage{Capacity: capacity, Used: used, Allocated: allocated, HostFree: free, HostFS: fs}
	}
	tests := []struct {
		name   string
		drives []driveSpace
		want   []HostSpace
		short  []bool
	}{
		{"fits", []driveSpace{{"s0", u(10*gib, gib, 2*gib, 40*gib, 1)}, {"s0", u(10*gib, 0, gib, 40*gib, 1)}},
			[]HostSpace{{Server: "s0", Drives: 2, Free: 40 * gib, Promised: 17 * gib}}, []bool{false}},
		{"another user filled the disk", []driveSpace{{"s0", u(10*gib, 0, 0, 5*gib, 1)}, {"s0", u(10*gib, 0, 0, 5*gib, 1)}},
			[]HostSpace{{Server: "s0", Drives: 2, Free: 5 * gib, Promised: 20 * gib}}, []bool{true}},
		{"files format counts fragments", []driveSpace{{"s0", u(10*gib, 4*gib, 0, 8*gib, 1)}},
			[]HostSpace{{Server: "s0", Drives: 1, Free: 8 * gib, Promised: 6 * gib}}, []bool{false}},
		{"a full drive promises nothing", []driveSpace{{"s0", u(10*gib, 10*gib, 11*gib, 1, 1)}},
			[]HostSpace{{Server: "s0", Drives: 1, Free: 1, Promised: 0}}, []bool{false}},
		{"two file systems, two servers", []driveSpace{
			{"s1", u(10*gib, 0, 0, 5*gib, 7)}, {"s0", u(10*gib, 0, 0, 50*gib, 2)}, {"s0", u(10*gib, 0, 0, 5*gib, 1)}},
			[]HostSpace{{Server: "s0", Drives: 1, Free: 5 * gib, Promised: 10 * gib}, {Server: "s0", Drives: 1, Free: 50 * gib, Promised: 10 * gib},
				{Server: "s1", Drives: 1, Free: 5 * gib, Promised: 10 * gib}}, []bool{true, false, true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := hostSpaces(tc.drives)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			for i, h := range got {
				if h.Short() != tc.short[i] {
					t.Errorf("%+v: short %v, want %v", h, h.Short(), tc.short[i])
				}
			}
		})
	}
}
