package meta

import (
	"errors"
	"fmt"
	"slices"
)

// Sentinel errors of the Store. They are returned wrapped with context;
// test them with errors.Is. The FUSE layer maps them to errno values.
var (
	ErrNotFound    = errors.New("meta: not found")               // ENOENT
	ErrExist       = errors.New("meta: already exists")          // EEXIST
	ErrNotDir      = errors.New("meta: not a directory")         // ENOTDIR
	ErrIsDir       = errors.New("meta: is a directory")          // EISDIR
	ErrNotEmpty    = errors.New("meta: directory not empty")     // ENOTEMPTY
	ErrInvalid     = errors.New("meta: invalid argument")        // EINVAL
	ErrNameTooLong = errors.New("meta: name too long")           // ENAMETOOLONG
	ErrPerm        = errors.New("meta: operation not permitted") // EPERM
	ErrConflict    = errors.New("meta: generation conflict")     // EAGAIN (caller retries)
	ErrPoolFull    = errors.New("meta: pool full")               // ENOSPC
	ErrCorrupt     = errors.New("meta: corrupt record")          // EIO
)

// ConflictError is returned by CommitStripes when the current generation of
// one or more stripes differs from the commit's OldGen. Nothing was changed.
// errors.Is(err, ErrConflict) is true.
type ConflictError struct {
	Ino     Ino
	Stripes []uint64 // the stripes whose generation moved, ascending
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("meta: generation conflict on inode %d stripes %v", e.Ino, e.Stripes)
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

func newConflict(ino Ino, stripes []uint64) *ConflictError {
	slices.Sort(stripes)
	return &ConflictError{Ino: ino, Stripes: stripes}
}
