package bench

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrUsage wraps every error about a bad option or argument.
var ErrUsage = errors.New("bench: bad usage")

// ParseSize parses a byte count: a plain number or one with a binary suffix
// k, m, g or t (KiB, MiB, GiB, TiB; case-insensitive, an optional trailing
// "b" or "ib" is accepted: 4k, 4K, 4KiB, 4kb). Sizes must be positive.
func ParseSize(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	t = strings.TrimSuffix(t, "ib")
	t = strings.TrimSuffix(t, "b")
	mult := int64(1)
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'k':
			mult = 1 << 10
		case 'm':
			mult = 1 << 20
		case 'g':
			mult = 1 << 30
		case 't':
			mult = 1 << 40
		}
		if mult != 1 {
			t = t[:n-1]
		}
	}
	v, err := strconv.ParseInt(t, 10, 64)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("%w: size %q: want a positive number with an optional k, m, g or t suffix", ErrUsage, s)
	}
	if v > (1<<62)/mult {
		return 0, fmt.Errorf("%w: size %q is too large", ErrUsage, s)
	}
	return v * mult, nil
}

// FormatSize writes a byte count the way ParseSize reads it, with the
// largest binary suffix that divides it exactly (4096 -> "4k").
func FormatSize(n int64) string {
	for _, u := range []struct {
		s     string
		shift uint
	}{{"t", 40}, {"g", 30}, {"m", 20}, {"k", 10}} {
		if n >= 1<<u.shift && n%(1<<u.shift) == 0 {
			return strconv.FormatInt(n>>u.shift, 10) + u.s
		}
	}
	return strconv.FormatInt(n, 10)
}

// ParseSizeList parses a comma-separated sweep of sizes ("1k,4k,64k").
// Duplicates are rejected, order is kept.
func ParseSizeList(s string) ([]int64, error) {
	var out []int64
	seen := map[int64]bool{}
	for _, f := range splitList(s) {
		v, err := ParseSize(f)
		if err != nil {
			return nil, err
		}
		if seen[v] {
			return nil, fmt.Errorf("%w: %q lists %s twice", ErrUsage, s, FormatSize(v))
		}
		seen[v] = true
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: empty size list", ErrUsage)
	}
	return out, nil
}

// ParseIntList parses a comma-separated sweep of positive integers
// ("1,2,4,8"). Duplicates are rejected, order is kept.
func ParseIntList(s string) ([]int, error) {
	var out []int
	seen := map[int]bool{}
	for _, f := range splitList(s) {
		v, err := strconv.Atoi(f)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("%w: %q in %q is not a positive integer", ErrUsage, f, s)
		}
		if seen[v] {
			return nil, fmt.Errorf("%w: %q lists %d twice", ErrUsage, s, v)
		}
		seen[v] = true
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: empty list", ErrUsage)
	}
	return out, nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	if strings.Count(s, ",") >= len(out) && len(out) > 0 && strings.TrimSpace(s) != "" {
		// "1,,2" or a trailing comma: an empty element is a typo, say so.
		return append(out, "")
	}
	return out
}
