package fusefs

import (
	"context"
	"errors"
	"syscall"

	"poolfs/internal/client"
	"poolfs/internal/meta"
)

// errnoTable maps the sentinel errors of the layers below to errno values.
// The first match wins.
var errnoTable = []struct {
	err   error
	errno syscall.Errno
}{
	{meta.ErrNotFound, syscall.ENOENT},
	{meta.ErrExist, syscall.EEXIST},
	{meta.ErrNotDir, syscall.ENOTDIR},
	{meta.ErrIsDir, syscall.EISDIR},
	{meta.ErrNotEmpty, syscall.ENOTEMPTY},
	{meta.ErrNameTooLong, syscall.ENAMETOOLONG},
	{meta.ErrInvalid, syscall.EINVAL},
	{meta.ErrPerm, syscall.EPERM},
	{meta.ErrConflict, syscall.EAGAIN},
	{meta.ErrPoolFull, syscall.ENOSPC},
	{client.ErrPoolFull, syscall.ENOSPC},
	{meta.ErrNoXattr, syscall.ENODATA},
	{meta.ErrCorrupt, syscall.EIO},
	{client.ErrDataLoss, syscall.EIO},
	{client.ErrUnavailable, syscall.EIO},
	{client.ErrWouldBlock, syscall.EAGAIN}, // a request tried inline (uring.go)
	{context.Canceled, syscall.EINTR},
	{context.DeadlineExceeded, syscall.ETIMEDOUT},
}

// toErrno converts an error of the client or the metadata service into the
// errno returned to the kernel: 0 for nil, the errno itself for a
// syscall.Errno anywhere in the chain, EIO for anything unknown.
func toErrno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	for _, e := range errnoTable {
		if errors.Is(err, e.err) {
			return e.errno
		}
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return syscall.EIO
}

// Errno is the errno an error of the client or the metadata service stands
// for, by the same table as the mount's replies; other boundaries that
// speak errno (the command line's messages) use it so that both agree.
func Errno(err error) syscall.Errno { return toErrno(err) }
