package metarpc

import (
	"context"

	"poolfs/internal/meta"
	"poolfs/internal/rpc"
)

// The methods poolfs fsck calls on a running cluster (package fsck).

type checkNamespaceArgs struct{ Repair bool }

type restoreStripeArgs struct {
	Ino    meta.Ino
	Rec    meta.StripeRec
	OldGen uint64
}

func registerFsck(s *rpc.Server, st *meta.Store) {
	handle(s, "meta.CheckNamespace", func(ctx context.Context, a checkNamespaceArgs) ([]meta.NamespaceProblem, error) {
		return st.CheckNamespace(ctx, a.Repair)
	})
	handle(s, "meta.RestoreStripe", func(ctx context.Context, a restoreStripeArgs) (none, error) {
		return none{}, st.RestoreStripe(ctx, a.Ino, a.Rec, a.OldGen)
	})
}

// CheckNamespace is meta.Store.CheckNamespace.
func (c *Client) CheckNamespace(ctx context.Context, repair bool) ([]meta.NamespaceProblem, error) {
	return call[[]meta.NamespaceProblem](ctx, c, "meta.CheckNamespace", checkNamespaceArgs{repair})
}

// RestoreStripe is meta.Store.RestoreStripe.
func (c *Client) RestoreStripe(ctx context.Context, ino meta.Ino, rec meta.StripeRec, oldGen uint64) error {
	_, err := call[none](ctx, c, "meta.RestoreStripe", restoreStripeArgs{ino, rec, oldGen})
	return err
}
