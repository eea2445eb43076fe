package metarpc

import (
	"context"

	"poolfs/internal/meta"
	"poolfs/internal/rpc"
)

// This file carries the calls that let a mount do a metadata operation in
// one round trip where the plain Store methods need several: create and
// open together, unlink returning the directory's new attributes, and
// batched releases. CreateAttr and UnlinkAttr are binary (wire.go).

// registerMount exposes ReleaseAll of st, and the binary calls (wire.go).
func registerMount(s *rpc.Server, st *meta.Store) {
	registerWire(s, st)
	handle(s, "meta.ReleaseAll", func(ctx context.Context, a []meta.Ino) (none, error) {
		return none{}, st.ReleaseAll(ctx, a)
	})
}

// ReleaseAll releases every inode of inos in one transaction (see
// meta.Store.ReleaseAll).
func (c *Client) ReleaseAll(ctx context.Context, inos []meta.Ino) error {
	_, err := call[none](ctx, c, "meta.ReleaseAll", inos)
	return err
}
