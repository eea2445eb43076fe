package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"poolfs/internal/identity"
	"poolfs/internal/rpc"
)

// revokedEvery is how often every process of a cluster with identities
// (management, storage and metadata services, clients) reads the
// revocation list again. `poolfs cluster revoke` takes effect on every
// connection within revokedEvery plus rpc.DefaultRecheckEvery.
const revokedEvery = 2 * time.Second

// revocations is a process's copy of the management service's revocation
// list (mgmt.Service.Revoked): certificates of a name on it are refused
// by identity.Trust.Revoked, which package rpc checks in handshakes,
// before every call and on the open connections every
// rpc.DefaultRecheckEvery, so a revoked node's open connections stop
// serving it and stop being served by it.
type revocations struct {
	names atomic.Pointer[map[string]string]
	once  sync.Once // the first failed refresh is logged
}

func (r *revocations) revoked(c *identity.Cert) bool {
	m := r.names.Load()
	if m == nil {
		return false
	}
	_, ok := (*m)[c.Name]
	return ok
}

// follow reads the list with fetch now and every revokedEvery until ctx
// ends.
func (r *revocations) follow(ctx context.Context, wg *sync.WaitGroup, fetch func(context.Context) (map[string]string, error), log *slog.Logger) {
	refresh := func() {
		m, err := fetch(ctx)
		if err != nil {
			if ctx.Err() == nil {
				r.once.Do(func() { log.Warn("read the revocation list", "err", err) })
			}
			return
		}
		r.names.Store(&m)
	}
	refresh()
	every(ctx, wg, revokedEvery, func(context.Context) { refresh() })
}

// FollowRevocations returns o with the identity of the node of dir (as
// ServerOptions) and, for a cluster with identities, the management
// service's revocation list, read now and every revokedEvery until ctx
// ends: certificates of revoked nodes are refused at the handshake and on
// open connections (package rpc). Until then too, it renews the node's
// certificate (renew.go). It is for services started outside this
// package (the metadata service).
func FollowRevocations(ctx context.Context, dir string, o rpc.ServerOptions, log *slog.Logger) (rpc.ServerOptions, error) {
	cr, err := loadCreds(dir)
	if err != nil || cr.ca == nil {
		return cr.server(o), err
	}
	info, secret, err := ReadInfo(dir)
	if err != nil {
		return o, err
	}
	rev := &revocations{}
	cr.revoked = rev.revoked // a revoked management service too
	mc, mclose, err := dialMgmt(info, secret, cr)
	if err != nil {
		return o, fmt.Errorf("cluster: reach the management service at %s for the revocation list: %w", info.Mgmt, err)
	}
	var wg sync.WaitGroup
	rev.follow(ctx, &wg, mc.Revoked, log)
	keepRenewed(ctx, &wg, dir, cr, mc.Renew, log)
	go func() {
		wg.Wait()
		mclose()
	}()
	return cr.server(o), nil
}
