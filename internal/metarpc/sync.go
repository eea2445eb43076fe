package metarpc

import (
	"context"

	"poolfs/internal/meta"
	"poolfs/internal/rpc"
)

// registerSync exposes Store.Sync: make every committed change durable.
func registerSync(s *rpc.Server, st *meta.Store) {
	handle(s, "meta.Sync", func(ctx context.Context, _ none) (none, error) {
		return none{}, st.Sync(ctx)
	})
}

// Sync makes every metadata change committed before the call durable.
func (c *Client) Sync(ctx context.Context) error {
	_, err := call[none](ctx, c, "meta.Sync", none{})
	return err
}
