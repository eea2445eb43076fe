package clustermap

import "fmt"

// DefaultSmallFileThreshold is the small-file threshold of a pool that has
// not set one: files of up to 64 KiB are mirrored (the small files of
// mdtest-style and AI-dataset workloads, 4 KiB to 64 KiB, all are).
const DefaultSmallFileThreshold = 64 << 10

// MaxSmallFileThreshold bounds the threshold: a mirrored stripe holds the
// whole small file in one fragment, which must fit one stripe unit too.
const MaxSmallFileThreshold = 64 << 20

// SmallFileLimit returns the pool's small-file threshold in bytes: a file
// whose size is at most it is stored as a mirror (1+M copies of one data
// fragment) rather than erasure-coded. 0 means small files are
// erasure-coded like every other.
func (p *Pool) SmallFileLimit() int64 {
	if p.SmallFileThreshold == nil {
		return DefaultSmallFileThreshold
	}
	return *p.SmallFileThreshold
}

// ValidateSmallFileThreshold rejects thresholds outside [0, MaxSmallFileThreshold].
func ValidateSmallFileThreshold(n int64) error {
	if n < 0 || n > MaxSmallFileThreshold {
		return fmt.Errorf("%w: small-file threshold %d: want 0 (off) to %d bytes", ErrInvalid, n, MaxSmallFileThreshold)
	}
	return nil
}
