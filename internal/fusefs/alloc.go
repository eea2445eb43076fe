package fusefs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
)

var _ fs.FileAllocater = (*handle)(nil)

// fallocate(2) modes.
const (
	fallocKeepSize  = 0x01 // FALLOC_FL_KEEP_SIZE
	fallocPunchHole = 0x02 // FALLOC_FL_PUNCH_HOLE
	fallocZeroRange = 0x10 // FALLOC_FL_ZERO_RANGE
)

// Allocate is fallocate(2):
//
//   - mode 0 and FALLOC_FL_KEEP_SIZE preallocate: the holes of the range
//     are stored as stripes of zeros, so the pool's capacity is taken at
//     once and later writes into the range do not grow the pool's usage
//     (client.File.Preallocate says what can still refuse them); mode 0
//     also extends the size.
//   - FALLOC_FL_PUNCH_HOLE|FALLOC_FL_KEEP_SIZE and FALLOC_FL_ZERO_RANGE
//     drop the stripes wholly inside the range and rewrite the partial
//     ones with zeros (client.File.ZeroRange); ZERO_RANGE without
//     KEEP_SIZE extends the size.
//   - Other modes (COLLAPSE_RANGE, INSERT_RANGE, UNSHARE_RANGE) are
//     EOPNOTSUPP.
func (h *handle) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	const max = 1 << 62
	if size == 0 {
		return syscall.EINVAL
	}
	if off > max || size > max || off+size > max {
		return syscall.EFBIG
	}
	f := h.file()
	keep := mode&fallocKeepSize != 0
	var err error
	switch mode &^ fallocKeepSize {
	case 0:
		err = f.Preallocate(bg(ctx), int64(off), int64(size), keep)
	case fallocPunchHole:
		if !keep {
			return syscall.EOPNOTSUPP // as Linux: a hole keeps the size
		}
		err = f.ZeroRange(bg(ctx), int64(off), int64(size), true)
	case fallocZeroRange:
		err = f.ZeroRange(bg(ctx), int64(off), int64(size), keep)
	default:
		return syscall.EOPNOTSUPP
	}
	return h.fsys.errno("fallocate", err)
}
