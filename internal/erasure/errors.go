package erasure

import (
	"errors"
	"fmt"
)

// Sentinel errors. Errors returned by this package wrap one of them and add
// the context an operator needs (fragment key, block index, counts).
var (
	// ErrCorrupt means a fragment header is malformed: bad magic, unknown
	// version or flags, impossible sizes, truncated input or a header CRC
	// mismatch. The fragment cannot be trusted at all.
	ErrCorrupt = errors.New("erasure: corrupt fragment header")

	// ErrChecksum means one or more data blocks of a fragment fail their
	// CRC32C. The header is intact; see *ChecksumError for which blocks.
	ErrChecksum = errors.New("erasure: checksum mismatch")

	// ErrTooManyLost means more than m of the k+m fragments of a stripe are
	// missing, so the stripe cannot be decoded.
	ErrTooManyLost = errors.New("erasure: too many fragments lost")
)

// ChecksumError reports the data blocks of one fragment whose CRC32C does not
// match the header. Block b covers shard bytes [b*BlockSize, (b+1)*BlockSize)
// (the last block may be short). errors.Is(err, ErrChecksum) holds.
type ChecksumError struct {
	Key    FragmentKey
	Blocks []int // ascending block indices that failed
}

func (e *ChecksumError) Error() string {
	if len(e.Blocks) == 1 {
		b := e.Blocks[0]
		return fmt.Sprintf("%v: fragment %v block %d (shard offset %d)",
			ErrChecksum, e.Key, b, b*BlockSize)
	}
	return fmt.Sprintf("%v: fragment %v blocks %v (%d KiB each)",
		ErrChecksum, e.Key, e.Blocks, BlockSize>>10)
}

// Is reports whether target is ErrChecksum.
func (e *ChecksumError) Is(target error) bool { return target == ErrChecksum }

func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
}
