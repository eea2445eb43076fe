package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"poolfs/internal/identity"
	"poolfs/internal/rpc"
)

// Certificate renewal. A certificate is valid for the management
// service's MgmtConfig.CertLifetime (default certLifetime). Every process
// of a node with an identity (management, storage and metadata services,
// clients) asks the leading management service over its authenticated
// connection, with mgmt.Renew, for a fresh certificate of the same name,
// role and key; the service signs one when less than a third of its
// lifetime is left (renewDue) and the caller is not revoked (package rpc
// refuses revoked callers before any handler runs), and answers nothing
// before. The process asks after a tenth of its certificate's remaining
// time, between renewCheckMin and renewCheckMax apart, so the renewal
// lands well before the expiry; it then presents the new certificate on
// every new connection (identity.Current) and saves it to node.cert. A
// node whose certificate expired (it was off, or the management service
// could not renew it in time) enrols again with the credential it joined
// with (EnsureIdentity): at start, and every renewExpiredEvery while it
// runs.
const (
	renewCheckMin     = 100 * time.Millisecond
	renewCheckMax     = time.Hour
	renewExpiredEvery = 5 * time.Second
)

// renewDue reports whether c, held by a node at now, is in the last third
// of lifetime.
func renewDue(c *identity.Cert, lifetime time.Duration, now time.Time) bool {
	return c.NotAfter.Sub(now) < lifetime/3
}

// renewHandler serves mgmt.Renew: it signs, with ca (nil: this
// management service holds no CA key), a certificate of lifetime for the
// caller's own name, role and key, if its certificate is due (renewDue);
// else it answers no certificate.
func renewHandler(ca *identity.CA, lifetime time.Duration) rpc.HandlerFunc {
	return func(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
		peer := rpc.PeerFrom(ctx)
		switch {
		case peer == nil:
			return nil, fmt.Errorf("%w: renewal is for nodes with a certificate", rpc.ErrForbidden)
		case ca == nil:
			return nil, fmt.Errorf("%w: this management service holds no cluster CA key (ca.key): renew while one that holds it leads", rpc.ErrForbidden)
		case !renewDue(peer, lifetime, time.Now()):
			return nil, nil
		}
		cert, err := ca.Issue(peer.Name, peer.Role, randomSerial(), time.Now().Add(lifetime), peer.Key)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", rpc.ErrForbidden, err)
		}
		return &rpc.Response{Result: cert.Encoded()}, nil
	}
}

// keepRenewed renews the identity cr.id of the node of dir through renew
// (mgmt.Client.Renew) until ctx ends, as the comment above says. A
// failed attempt is logged at most once a minute and tried again.
func keepRenewed(ctx context.Context, wg *sync.WaitGroup, dir string, cr creds, renew func(context.Context) ([]byte, error), log *slog.Logger) {
	if cr.ca == nil || cr.id.Get() == nil {
		return
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		var warned time.Time
		for {
			left := time.Until(cr.id.Get().Cert.NotAfter)
			wait := min(max(left/10, renewCheckMin), renewCheckMax)
			if left <= 0 {
				wait = renewExpiredEvery
			}
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			var err error
			if time.Now().Before(cr.id.Get().Cert.NotAfter) {
				err = renewOnce(ctx, dir, cr, renew, log)
			} else {
				err = enrolAgain(ctx, dir, cr, log)
			}
			if err != nil && ctx.Err() == nil && time.Since(warned) > time.Minute {
				warned = time.Now()
				log.Warn("renew this node's certificate", "cert", cr.id.Get().Cert.String(), "err", err)
			}
		}
	}()
}

// renewOnce asks for a fresh certificate and, if one comes, checks it,
// presents it from now on and saves it in dir.
func renewOnce(ctx context.Context, dir string, cr creds, renew func(context.Context) ([]byte, error), log *slog.Logger) error {
	raw, err := renew(ctx)
	if err != nil || len(raw) == 0 {
		return err
	}
	old := cr.id.Get()
	cert, err := checkRenewed(raw, old.Cert, cr.ca)
	if err != nil {
		return fmt.Errorf("bad certificate from the management service: %w", err)
	}
	id := &identity.Identity{Cert: cert, Key: old.Key}
	cr.id.Set(id)
	log.Info("renewed this node's certificate", "cert", cert.String())
	return id.Save(dir)
}

// enrolAgain gives the node of dir, whose certificate cr.id expired, a
// new identity of the same name and role (EnsureIdentity enrols it, unless
// another process of the node did already) and presents it from now on.
func enrolAgain(ctx context.Context, dir string, cr creds, log *slog.Logger) error {
	old := cr.id.Get().Cert
	if err := EnsureIdentity(ctx, dir, old.Role, old.Name); err != nil {
		return err
	}
	id, err := identity.Load(dir)
	if err != nil {
		return err
	}
	if !time.Now().Before(id.Cert.NotAfter) {
		return fmt.Errorf("%s expired", id.Cert)
	}
	cr.id.Set(id)
	log.Info("enrolled this node again, its certificate having expired", "cert", id.Cert.String())
	return nil
}

// checkRenewed decodes raw, a renewal of old, and checks that the CA ca
// signed it for old's name, role and key, to expire later than old.
func checkRenewed(raw []byte, old *identity.Cert, ca []byte) (*identity.Cert, error) {
	cert, err := identity.Decode(raw)
	if err != nil {
		return nil, err
	}
	if err := (&identity.Trust{CA: ca, Roles: []identity.Role{old.Role}}).Verify(cert); err != nil {
		return nil, err
	}
	if cert.Name != old.Name || !cert.Key.Equal(old.Key) || !cert.NotAfter.After(old.NotAfter) {
		return nil, errors.New("it does not renew this node's certificate (name, key or expiry)")
	}
	return cert, nil
}
