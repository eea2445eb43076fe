package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"poolfs/internal/client"
	"poolfs/internal/identity"
	"poolfs/internal/metarpc"
	"poolfs/internal/mgmt"
	"poolfs/internal/placement"
	"poolfs/internal/rpc"
	"poolfs/internal/storage"
)

// Conn is a client's connection to a running cluster.
type Conn struct {
	Client *client.Client
	Mgmt   *mgmt.Client
	Meta   *metarpc.Client
	Info   Info

	secret  []byte
	creds   creds
	closers []func() error
}

// StorageDialer returns a new dialer of the cluster's storage servers
// (for tools that call them besides the client: fsck, the survey) that
// proves this machine's identity. The caller closes it.
func (c *Conn) StorageDialer() *storage.Dialer {
	return storage.NewDialer(c.secret, c.creds.client(rpc.ClientOptions{}, identity.RoleServer))
}

// Connect finds the cluster whose directory is dir and connects to it.
func Connect(ctx context.Context, dir string, opts client.Options) (*Conn, error) {
	info, secret, err := ReadInfo(dir)
	if err != nil {
		return nil, err
	}
	if err := ensureClientIdentity(ctx, dir); err != nil {
		return nil, err
	}
	cr, err := loadCreds(dir)
	if err != nil {
		return nil, err
	}
	rev := &revocations{}
	if cr.ca != nil { // refuse revoked management, metadata and storage servers, on open connections too
		cr.revoked = rev.revoked
	}
	mc, mclose, err := dialMgmt(info, secret, cr)
	if err != nil {
		return nil, fmt.Errorf("cluster: connect to %s (is `poolfs up` running?): %w", info.Mgmt, err)
	}
	stopRevocations := func() error { return nil }
	if cr.ca != nil {
		rctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		log := opts.Logger
		if log == nil {
			log = slog.New(slog.DiscardHandler)
		}
		rev.follow(rctx, &wg, mc.Revoked, log)
		keepRenewed(rctx, &wg, dir, cr, mc.Renew, log)
		stopRevocations = func() error { cancel(); wg.Wait(); return nil }
	}
	var metaRC *rpc.Client
	if info.Meta == "" { // a machine that joined: the map names the metadata servers
		metaRC, err = dialMeta(ctx, mc, secret, cr)
	} else { // `poolfs up` (its metadata service shares mgmt's address), or a server cluster.json names
		metaRC, err = rpc.Dial(info.Meta, secret, cr.client(rpc.ClientOptions{Errors: allErrors()}, identity.RoleMgmt, identity.RoleMeta))
	}
	if err != nil {
		stopRevocations()
		mclose()
		return nil, fmt.Errorf("cluster: connect to the metadata service: %w", err)
	}
	dialer := storage.NewClientDialer(secret, cr.client(rpc.ClientOptions{}, identity.RoleServer))
	c := &Conn{Info: info, Mgmt: mc, Meta: metarpc.NewClient(metaRC), secret: secret, creds: cr}
	c.closers = append(c.closers, stopRevocations, dialer.Close, mclose, metaRC.Close)
	// Read repairs are counted by the management service, in batches.
	repairs := mgmt.NewRepairBatcher(c.Mgmt, time.Second)
	if prev := opts.OnRepair; prev != nil {
		opts.OnRepair = func(id placement.DriveID) { prev(id); repairs.Repaired(id) }
	} else {
		opts.OnRepair = repairs.Repaired
	}
	c.closers = append([]func() error{func() error { return repairs.Flush(context.Background()) }}, c.closers...)
	// Drives that do not answer are reported to the failure detector,
	// which probes them itself: those that fail or refuse as their calls
	// end (mgmt.ReportingDrives), those that make no progress for this
	// client by Options.OnUnreachable.
	if prev := opts.OnUnreachable; prev != nil {
		opts.OnUnreachable = func(id placement.DriveID) { prev(id); reportUnreachable(c.Mgmt, id) }
	} else {
		opts.OnUnreachable = func(id placement.DriveID) { reportUnreachable(c.Mgmt, id) }
	}
	c.Client = client.New(c.Meta, c.Mgmt, mgmt.ReportingDrives(dialer, c.Mgmt), opts)
	// The client's folds and repairs end before the connections they use.
	c.closers = append([]func() error{func() error { c.Client.Close(); return nil }}, c.closers...)
	return c, nil
}

// dialMeta connects to the first metadata server of the map that answers.
func dialMeta(ctx context.Context, mc *mgmt.Client, secret []byte, cr creds) (*rpc.Client, error) {
	m, err := mc.Map(ctx)
	if err != nil {
		return nil, fmt.Errorf("cluster: read the cluster map: %w", err)
	}
	if len(m.Meta) == 0 {
		return nil, fmt.Errorf("cluster: no metadata server has joined the cluster yet (poolfs meta --join-file FILE)")
	}
	var errs []error
	for _, addr := range m.Meta {
		rc, err := rpc.Dial(addr, secret, cr.client(rpc.ClientOptions{Errors: metarpc.Errors()}, identity.RoleMeta))
		if err == nil {
			return rc, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", addr, err))
	}
	return nil, fmt.Errorf("cluster: no metadata server answers: %w", errors.Join(errs...))
}

// AnnounceMeta tells the management service of the cluster of dir that a
// metadata server serves at addr (clients find it in the map).
func AnnounceMeta(ctx context.Context, dir, addr string) error {
	info, secret, err := ReadInfo(dir)
	if err != nil {
		return err
	}
	mc, mclose, err := DialMgmt(info, secret)
	if err != nil {
		return fmt.Errorf("cluster: reach the management service at %s: %w", info.Mgmt, err)
	}
	defer mclose()
	if err := mc.RegisterMeta(ctx, addr); err != nil {
		return fmt.Errorf("cluster: announce metadata server %s: %w", addr, err)
	}
	return nil
}

// Close closes the connections.
func (c *Conn) Close() error {
	for _, f := range c.closers {
		f()
	}
	return nil
}

// allErrors is the error table of a connection that reaches several
// services.
func allErrors() *rpc.ErrorTable {
	return rpc.NewErrorTable(append(append(storage.ErrorCodes(), metarpc.ErrorCodes()...), mgmt.ErrorCodes()...)...)
}

// InProcessDrives is how a client running in this process (`poolfs up
// --mount`) reaches drives: the drives this cluster's storage server holds
// directly, without RPC (storage.Server.InProcess), any other through
// remote. As for a remote client, drives that do not answer or fail are
// reported to the failure detector (mgmt.ReportingDrives), so a write is
// placed again around them instead of failing.
func (c *Cluster) InProcessDrives(remote storage.Peers) client.Drives {
	return mgmt.ReportingDrives(c.storage.InProcess(remote), c.Mgmt)
}

// reportUnreachable tells mc, in the background, that drive id does not
// answer this client.
func reportUnreachable(mc *mgmt.Client, id placement.DriveID) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = mc.DriveUnreachable(ctx, id) // best effort: the client avoids the server already
	}()
}
