package storage

import "context"

// A client write that replaces a stripe's fragment (the same inode, stripe
// and index at an older generation) adds nothing to the pool for long: the
// collector deletes the old generation within seconds of the commit, and
// the pool's accounting counts the stripe once. So a drive at its client
// write limit admits such a write beyond the limit, up to replaceAllowance
// of the room above it, if it still holds the fragment being replaced
// (clientWrite). This is what keeps a write into preallocated space from
// failing with "pool full".

type replacesKey struct{}

// Replacing returns ctx carrying the generation that fragment writes made
// with it replace (the stripe's committed generation; 0 for a new stripe,
// which replaces nothing). RemoteDrive.WriteFragment sends it with
// storage.Write, and the in-process drives of InProcess pass it on to the
// write limit.
func Replacing(ctx context.Context, gen uint64) context.Context {
	if gen == 0 {
		return ctx
	}
	return context.WithValue(ctx, replacesKey{}, gen)
}

// replacedGen is the generation Replacing put in ctx, or 0.
func replacedGen(ctx context.Context) uint64 {
	g, _ := ctx.Value(replacesKey{}).(uint64)
	return g
}

// replaceAllowance is how much of a drive's room between its client write
// limit and its capacity (the rebuild reserve) replacing writes may take
// (limit + (capacity − limit)/replaceAllowance): a quarter, so at most a
// quarter of the reserve is ever borrowed, and only for the seconds until
// the collector frees the old generations, while three quarters stay for a
// rebuild that starts meanwhile. A quarter of the reserve holds many
// stripes' fragments on any real drive (the reserve is a sizeable share of
// the drive for any preservation level), so a file rewritten in place
// stripe after stripe is not throttled by it.
const replaceAllowance = 4
