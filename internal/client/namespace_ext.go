package client

import (
	"context"

	"poolfs/internal/meta"
)

// OpenFiles is the part of the metadata service that a mount needs to keep
// unlinked files alive while they are open (see meta.Store.Open), to find
// ".." and to report inode counts.
type OpenFiles interface {
	Open(ctx context.Context, ino meta.Ino) error
	Release(ctx context.Context, ino meta.Ino) error
	Parent(ctx context.Context, ino meta.Ino) (meta.Ino, error)
	Statfs(ctx context.Context) (inodes uint64, err error)
}

// Xattrs is the part of the metadata service that stores extended
// attributes (see meta.Store.SetXattr for the flags and limits).
type Xattrs interface {
	GetXattr(ctx context.Context, ino meta.Ino, name string) ([]byte, error)
	SetXattr(ctx context.Context, ino meta.Ino, name string, value []byte, flags meta.XattrFlags) error
	ListXattr(ctx context.Context, ino meta.Ino) ([]string, error)
	RemoveXattr(ctx context.Context, ino meta.Ino, name string) error
}
