package storage

import (
	"context"
	"time"

	"poolfs/internal/chunkstore"
	"poolfs/internal/erasure"
	"poolfs/internal/placement"
	"poolfs/internal/rpc"
)

// RemoteDrive is a drive behind a storage server. It implements
// chunkstore.Drive.
type RemoteDrive struct {
	c  *rpc.Client
	id placement.DriveID
}

var _ chunkstore.Drive = (*RemoteDrive)(nil)

// NewRemoteDrive returns the drive id served by the server behind c.
func NewRemoteDrive(c *rpc.Client, id placement.DriveID) *RemoteDrive {
	return &RemoteDrive{c: c, id: id}
}

// WriteFragment implements chunkstore.Drive. It sends the generation ctx
// says the write replaces (Replacing) and whether it is deferred
// (chunkstore.Deferred).
func (r *RemoteDrive) WriteFragment(ctx context.Context, key erasure.FragmentKey, frag []byte) error {
	a := fragArgs{Drive: r.id, Key: key, Replaces: replacedGen(ctx), Deferred: chunkstore.IsDeferred(ctx)}
	return r.c.Call(ctx, "storage.Write", a, frag, nil)
}

// Sync implements chunkstore.Drive.
func (r *RemoteDrive) Sync(ctx context.Context) error {
	return r.c.Call(ctx, "storage.Sync", listArgs{Drive: r.id}, nil, nil)
}

// ReadFragment implements chunkstore.Drive.
func (r *RemoteDrive) ReadFragment(ctx context.Context, key erasure.FragmentKey, off, n int64, dst []byte) ([]byte, error) {
	if n == 0 {
		return dst[:0], nil
	}
	return r.c.CallBody(ctx, "storage.Read", fragArgs{Drive: r.id, Key: key, Off: off, N: n}, nil, nil, dst)
}

// DeleteFragment implements chunkstore.Drive.
func (r *RemoteDrive) DeleteFragment(ctx context.Context, key erasure.FragmentKey) error {
	return r.c.Call(ctx, "storage.Delete", fragArgs{Drive: r.id, Key: key}, nil, nil)
}

// ListFragments implements chunkstore.Drive.
func (r *RemoteDrive) ListFragments(ctx context.Context, fn func(key erasure.FragmentKey, size int64, mtime time.Time) error) error {
	var out []FragmentInfo
	if err := r.c.Call(ctx, "storage.List", listArgs{Drive: r.id}, nil, &out); err != nil {
		return err
	}
	for _, f := range out {
		if err := fn(f.Key, f.Size, f.MTime); err != nil {
			return err
		}
	}
	return nil
}

// Stat implements chunkstore.Drive.
func (r *RemoteDrive) Stat(ctx context.Context) (chunkstore.Usage, error) {
	var u chunkstore.Usage
	err := r.c.Call(ctx, "storage.Stat", listArgs{Drive: r.id}, nil, &u)
	return u, err
}
