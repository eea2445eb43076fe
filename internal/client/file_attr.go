package client

import (
	"context"
	"fmt"

	"poolfs/internal/meta"
)

// Setattr changes attributes of the open file (not its size: Truncate)
// through the metadata service and keeps the File's view of them.
//
// An mtime set here (SetMtime, SetMtimeNow) survives the flush of writes
// buffered before it: the commits that flush them keep it instead of
// taking the time of the flush, until the next write, as a local file
// system keeps the time futimens set after a write (tar, cp -p and rsync
// -t set times on a descriptor before closing it). Background writes
// of full stripes that are in flight are waited for first, so none of
// them commits a later time over it.
// Errors: those of meta Setattr; meta.ErrInvalid for SetSize.
func (f *File) Setattr(ctx context.Context, in meta.SetAttr) (meta.Attr, error) {
	if in.Valid&meta.SetSize != 0 {
		return meta.Attr{}, fmt.Errorf("%w: setattr of %s: size goes through Truncate", meta.ErrInvalid, f.name)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	setsMtime := in.Valid&(meta.SetMtime|meta.SetMtimeNow) != 0
	if setsMtime {
		f.waitLocked()
	}
	a, err := f.c.meta.Setattr(ctx, f.mu.attr.Ino, in)
	if err != nil {
		return meta.Attr{}, err
	}
	if setsMtime {
		f.mu.mtime = a.Mtime
	}
	f.mu.attr = a
	return a, nil
}

// Set-id mode bits.
const (
	modeSetuid    = 0o4000
	modeSetgid    = 0o2000
	modeGroupExec = 0o0010
)

// KillSuidGid clears S_ISUID, and S_ISGID if the group may execute, as a
// write by a caller without CAP_FSETID must. It asks the metadata service
// only when the file's mode as this File knows it has such a bit (so an
// unprivileged writer of an ordinary file pays nothing), and reports
// whether it did. With try it never waits: ErrWouldBlock if the mutex is
// held or a call is needed.
func (f *File) KillSuidGid(ctx context.Context, try bool) (bool, error) {
	if try {
		if !f.mu.TryLock() {
			return false, ErrWouldBlock
		}
	} else {
		f.mu.Lock()
	}
	defer f.mu.Unlock()
	m := f.mu.attr.Mode
	if m&modeSetuid == 0 && m&(modeSetgid|modeGroupExec) != modeSetgid|modeGroupExec {
		return false, nil
	}
	if try {
		return false, ErrWouldBlock
	}
	a, err := f.c.meta.Setattr(ctx, f.mu.attr.Ino, meta.SetAttr{Valid: meta.SetKillSuidGid})
	if err != nil {
		return false, err
	}
	f.mu.attr = a
	return true, nil
}
