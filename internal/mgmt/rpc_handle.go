package mgmt

import (
	"context"
	"encoding/json"
	"fmt"

	"poolfs/internal/meta"
	"poolfs/internal/rpc"
)

// handleJSON registers an RPC method whose arguments are one JSON value of
// type A: arguments that do not decode are refused as invalid, and fn's
// result becomes the response.
func handleJSON[A any](r Handler, name string, fn func(ctx context.Context, a A) (any, error)) {
	r.Handle(name, func(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
		var a A
		if err := json.Unmarshal(req.Args, &a); err != nil {
			return nil, fmt.Errorf("%w: bad arguments: %v", meta.ErrInvalid, err)
		}
		res, err := fn(ctx, a)
		if err != nil {
			return nil, err
		}
		return &rpc.Response{Result: res}, nil
	})
}
