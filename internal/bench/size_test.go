package bench

import (
	"errors"
	"slices"
	"testing"
)

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		bad  bool
	}{
		{in: "1", want: 1},
		{in: "4096", want: 4096},
		{in: "1k", want: 1 << 10},
		{in: "1K", want: 1 << 10},
		{in: "4m", want: 4 << 20},
		{in: "4MiB", want: 4 << 20},
		{in: "4mb", want: 4 << 20},
		{in: "1g", want: 1 << 30},
		{in: "2t", want: 2 << 40},
		{in: " 64k ", want: 64 << 10},
		{in: "", bad: true},
		{in: "k", bad: true},
		{in: "0", bad: true},
		{in: "-1k", bad: true},
		{in: "1.5m", bad: true},
		{in: "4x", bad: true},
		{in: "99999999999t", bad: true},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseSize(tc.in)
			if tc.bad {
				if !errors.Is(err, ErrUsage) {
					t.Fatalf("ParseSize(%q) = %d, %v; want ErrUsage", tc.in, got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
			}
			if back, _ := ParseSize(FormatSize(got)); back != got {
				t.Fatalf("FormatSize(%d) = %q does not parse back", got, FormatSize(got))
			}
		})
	}
}

func TestFormatSize(t *testing.T) {
	for n, want := range map[int64]string{1: "1", 1000: "1000", 1024: "1k", 1536: "1536", 4 << 20: "4m", 1 << 30: "1g", 3 << 40: "3t"} {
		if got := FormatSize(n); got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestParseSweeps(t *testing.T) {
	sizes := []struct {
		in   string
		want []int64
	}{
		{"1k,4k,64k,1m,4m", []int64{1 << 10, 4 << 10, 64 << 10, 1 << 20, 4 << 20}},
		{"4m, 1k", []int64{4 << 20, 1 << 10}},
		{"1m", []int64{1 << 20}},
		{"", nil}, {"1k,,4k", nil}, {"1k,", nil}, {"1k,1024", nil}, {"1k,x", nil},
	}
	for _, tc := range sizes {
		t.Run("sizes "+tc.in, func(t *testing.T) {
			got, err := ParseSizeList(tc.in)
			if tc.want == nil {
				if !errors.Is(err, ErrUsage) {
					t.Fatalf("ParseSizeList(%q) = %v, %v; want ErrUsage", tc.in, got, err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("ParseSizeList(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
		})
	}
	ints := []struct {
		in   string
		want []int
	}{
		{"1,2,4,8", []int{1, 2, 4, 8}},
		{"100,1000,10000", []int{100, 1000, 10000}},
		{"3", []int{3}},
		{"", nil}, {"0", nil}, {"-1", nil}, {"1,1", nil}, {"2,", nil}, {"1k", nil},
	}
	for _, tc := range ints {
		t.Run("ints "+tc.in, func(t *testing.T) {
			got, err := ParseIntList(tc.in)
			if tc.want == nil {
				if !errors.Is(err, ErrUsage) {
					t.Fatalf("ParseIntList(%q) = %v, %v; want ErrUsage", tc.in, got, err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("ParseIntList(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
		})
	}
}
