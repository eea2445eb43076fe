package fusefs

import (
	"errors"
	"fmt"
	"syscall"
	"testing"

	"poolfs/internal/client"
	"poolfs/internal/meta"
)

func TestToErrno(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("lookup 1 \"x\": %w", err) }
	cases := []struct {
		name string
		err  error
		want syscall.Errno
	}{
		{"nil", nil, 0},
		{"notfound", wrap(meta.ErrNotFound), syscall.ENOENT},
		{"exist", wrap(meta.ErrExist), syscall.EEXIST},
		{"notdir", wrap(meta.ErrNotDir), syscall.ENOTDIR},
		{"isdir", wrap(meta.ErrIsDir), syscall.EISDIR},
		{"notempty", wrap(meta.ErrNotEmpty), syscall.ENOTEMPTY},
		{"invalid", wrap(meta.ErrInvalid), syscall.EINVAL},
		{"nametoolong", wrap(meta.ErrNameTooLong), syscall.ENAMETOOLONG},
		{"perm", wrap(meta.ErrPerm), syscall.EPERM},
		{"conflict", &meta.ConflictError{Ino: 3}, syscall.EAGAIN},
		{"meta poolfull", wrap(meta.ErrPoolFull), syscall.ENOSPC},
		{"client poolfull", fmt.Errorf("commit f: %w", fmt.Errorf("%w: %v", client.ErrPoolFull, meta.ErrPoolFull)), syscall.ENOSPC},
		{"noxattr", wrap(meta.ErrNoXattr), syscall.ENODATA},
		{"corrupt", wrap(meta.ErrCorrupt), syscall.EIO},
		{"dataloss", wrap(client.ErrDataLoss), syscall.EIO},
		{"errno", wrap(syscall.EXDEV), syscall.EXDEV},
		{"unknown", errors.New("connection reset"), syscall.EIO},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := toErrno(c.err); got != c.want {
				t.Fatalf("toErrno(%v) = %v, want %v", c.err, got, c.want)
			}
		})
	}
}
