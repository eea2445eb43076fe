package metarpc

import (
	"context"
	"time"

	"poolfs/internal/meta"
	"poolfs/internal/rpc"
)

// Client sessions over RPC (see meta/session.go). A client opens a
// session, then binds its connections to it: rpc.Client.OnDial runs
// meta.SessionBind on every connection it opens, and the server keeps the
// session in the connection's slot, which every call of that connection
// carries to the Store. Calls on an unbound connection belong to no
// session.

type sessionSlotKey struct{}

type openSessionArgs struct {
	Info meta.Session
	TTL  time.Duration
}
type sessionArgs struct {
	ID  meta.SessionID
	TTL time.Duration
}

// registerSessions exposes the session calls and gives each connection its
// session slot.
func registerSessions(s *rpc.Server, st *meta.Store) {
	s.Intercept(func(ctx context.Context) context.Context {
		slot := &meta.SessionSlot{}
		rpc.ConnStateFrom(ctx).Set(sessionSlotKey{}, slot)
		return meta.WithSessionSlot(ctx, slot)
	})
	handle(s, "meta.SessionOpen", func(ctx context.Context, a openSessionArgs) (meta.Session, error) {
		return st.OpenSession(ctx, a.Info, a.TTL)
	})
	handle(s, "meta.SessionBind", func(ctx context.Context, a sessionArgs) (none, error) {
		// Refuse a session that is gone: the client must open a new one.
		if _, err := st.Session(ctx, a.ID); err != nil {
			return none{}, err
		}
		if slot, ok := rpc.ConnStateFrom(ctx).Get(sessionSlotKey{}).(*meta.SessionSlot); ok {
			slot.Set(a.ID)
		}
		return none{}, nil
	})
	handle(s, "meta.SessionRenew", func(ctx context.Context, a sessionArgs) (none, error) {
		return none{}, st.RenewSession(ctx, a.ID, a.TTL)
	})
	handle(s, "meta.SessionClose", func(ctx context.Context, a sessionArgs) (int, error) {
		return st.CloseSession(ctx, a.ID)
	})
	handle(s, "meta.Sessions", func(ctx context.Context, _ none) ([]meta.Session, error) {
		return st.Sessions(ctx)
	})
}

// OpenSession starts a session with a lease of ttl (meta.Store.OpenSession).
func (c *Client) OpenSession(ctx context.Context, info meta.Session, ttl time.Duration) (meta.Session, error) {
	return call[meta.Session](ctx, c, "meta.SessionOpen", openSessionArgs{info, ttl})
}

// BindSession makes every later call of c belong to session sid (0:
// none): each connection c opens from now on binds itself first.
func (c *Client) BindSession(sid meta.SessionID) {
	if sid == 0 {
		c.rc.OnDial(nil)
		return
	}
	c.rc.OnDial(func(ctx context.Context, call rpc.CallConn) error {
		return call(ctx, "meta.SessionBind", sessionArgs{ID: sid}, nil)
	})
}

// RenewSession extends the lease of sid (meta.Store.RenewSession).
func (c *Client) RenewSession(ctx context.Context, sid meta.SessionID, ttl time.Duration) error {
	_, err := call[none](ctx, c, "meta.SessionRenew", sessionArgs{sid, ttl})
	return err
}

// CloseSession ends sid, releasing what it holds open.
func (c *Client) CloseSession(ctx context.Context, sid meta.SessionID) (int, error) {
	return call[int](ctx, c, "meta.SessionClose", sessionArgs{ID: sid})
}

// Sessions lists the open sessions.
func (c *Client) Sessions(ctx context.Context) ([]meta.Session, error) {
	return call[[]meta.Session](ctx, c, "meta.Sessions", none{})
}
