package storage

import (
	"context"

	"poolfs/internal/placement"
)

// Ping asks the server for the list of its drives, a call that does no
// drive I/O: a server that does not answer it in time is hung or cut off,
// not merely busy with slow drives.
func (sc *ServerClient) Ping(ctx context.Context) error {
	var ids []placement.DriveID
	return sc.c.Call(ctx, "storage.Drives", struct{}{}, nil, &ids)
}
