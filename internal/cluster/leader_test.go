package cluster

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"poolfs/internal/clustermap"
	"poolfs/internal/identity"
	"poolfs/internal/meta"
	"poolfs/internal/meta/pgtest"
	"poolfs/internal/meta/postgres"
	"poolfs/internal/mgmt"
	"poolfs/internal/rpc"
)

// TestTwoMgmtOneLeads: of two management services over one database the
// first leads and the second stands by, refusing calls with ErrNotLeader
// naming the leader; a client given both addresses reaches the leader
// whichever it tries first. When the leader stops, the standby leads
// within the lease's time, with the map the leader left, and the same
// client carries on without an error.
func TestTwoMgmtOneLeads(t *testing.T) {
	url := pgtest.Start(t)
	dirA, dirB := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	tok, err := Create(dirA, "ha", "127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	if err := Join(dirB, tok); err != nil {
		t.Fatal(err)
	}
	issueFrom(t, dirA, dirB, identity.RoleMgmt, "b") // the placeholder address enrols nobody
	ctx := context.Background()
	led := make(chan string, 4)
	start := func(dir string) *MgmtNode {
		n, err := StartMgmt(ctx, MgmtConfig{Dir: dir, DB: url, Listen: "127.0.0.1:0", OnLeadership: func(leading bool, term uint64, leader string) {
			if leading {
				led <- leader
			}
		}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		return n
	}
	a := start(dirA)
	b := start(dirB)
	if got := <-led; got != a.Addr {
		t.Fatalf("first leader %s, want the first service %s", got, a.Addr)
	}
	if !a.Mgmt.Leading() || b.Mgmt.Leading() {
		t.Fatalf("leading: a %v, b %v; want a only", a.Mgmt.Leading(), b.Mgmt.Leading())
	}
	_, secret, err := ReadInfo(dirA)
	if err != nil {
		t.Fatal(err)
	}
	cr, err := loadCreds(dirA)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rpc.Dial(b.Addr, secret, cr.client(rpc.ClientOptions{Errors: allErrors()}))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	_, err = mgmt.NewClient(rc).Map(ctx)
	if !errors.Is(err, mgmt.ErrNotLeader) || mgmt.LeaderOf(err) != a.Addr {
		t.Fatalf("call on the standby: %v; want ErrNotLeader naming %s", err, a.Addr)
	}
	if _, err := b.Mgmt.Update(ctx, func(m *clustermap.Map) error { return nil }); !errors.Is(err, mgmt.ErrNotLeader) {
		t.Fatalf("map update on the standby: %v, want ErrNotLeader", err)
	}

	dirM := filepath.Join(t.TempDir(), "m") // a metadata server's
	if err := Join(dirM, tok); err != nil {
		t.Fatal(err)
	}
	issueFrom(t, dirA, dirM, identity.RoleMeta, "meta")
	mc, closeMC, err := DialMgmt(Info{Mgmt: b.Addr + "," + a.Addr, Dir: dirM}, secret)
	if err != nil {
		t.Fatal(err)
	}
	defer closeMC()
	if err := mc.RegisterMeta(ctx, "10.1.1.1:7000"); err != nil {
		t.Fatalf("register through the standby's address first: %v", err)
	}
	a.Close()
	start2 := time.Now()
	select {
	case got := <-led:
		if got != b.Addr {
			t.Fatalf("new leader %s, want %s", got, b.Addr)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the standby did not lead within 10 s of the leader's stop")
	}
	t.Logf("standby leads %v after the leader stopped", time.Since(start2).Round(time.Millisecond))
	m, err := mc.Map(ctx)
	if err != nil {
		t.Fatalf("map through the new leader: %v", err)
	}
	if len(m.Meta) != 1 || m.Meta[0] != "10.1.1.1:7000" || m.Name != "ha" {
		t.Fatalf("new leader's map: name %q, meta %v; want the old leader's", m.Name, m.Meta)
	}
	// The first service started again stands by: the lease is B's.
	a = start(dirA)
	if a.Mgmt.Leading() || !b.Mgmt.Leading() {
		t.Fatalf("after A's restart: leading a %v, b %v; want b only", a.Mgmt.Leading(), b.Mgmt.Leading())
	}
	if _, err := StartMgmt(ctx, MgmtConfig{Dir: dirA, DB: url, Listen: "127.0.0.1:0"}); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("a second service on A's directory: %v, want it refused", err)
	}
}

// TestCrashedMgmtRestartLeadsAtOnce: a leader that died without giving up
// its lease leads again as soon as it restarts from the same directory (its
// holder id is kept there), instead of waiting for the lease to expire.
func TestCrashedMgmtRestartLeadsAtOnce(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Start(t)
	dir := filepath.Join(t.TempDir(), "a")
	if _, err := Create(dir, "ha", "127.0.0.1:1"); err != nil {
		t.Fatal(err)
	}
	holder, err := mgmtHolder(dir)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	e, err := OpenEngine(ctx, dir, url, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	db := e.(leaseDB)
	// The crashed run held the lease and never released it.
	if st, err := db.AcquireLease(ctx, mgmtLease, holder, "127.0.0.1:1", leaseTTL); err != nil || !st.Held {
		t.Fatalf("crashed run: %+v, %v", st, err)
	}
	again, err := mgmtHolder(dir)
	if err != nil || again != holder {
		t.Fatalf("holder id after restart %q, %v; want %q", again, err, holder)
	}
	svc := mgmt.New(meta.New(e, meta.Options{}), nil, nil, nil)
	svc.Follow("")
	l := newLeader(db, svc, again, "127.0.0.1:1", "ha", log)
	l.lead = func(context.Context, *sync.WaitGroup) {}
	l.step(ctx)
	if !svc.Leading() {
		t.Fatal("the restarted service does not lead at its first step")
	}
}

// TestDeposedLeaderCannotWriteMap: a leader paused past its lease, whose
// standby took over, has its next map update refused, even though it still
// believes it leads; the map keeps the new leader's epochs.
func TestDeposedLeaderCannotWriteMap(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Start(t)
	open := func() (*postgres.Engine, *mgmt.Service) {
		e, err := postgres.Open(ctx, url, postgres.Owner{ID: "c", Where: "t"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		return e, mgmt.New(meta.New(e, meta.Options{}), nil, nil, nil)
	}
	ea, sa := open()
	eb, sb := open()
	// A long lease while A must lead, then a short one that its pause
	// outlasts: a loaded machine cannot expire it between two steps.
	const ttl, short = time.Minute, 300 * time.Millisecond
	st, err := ea.AcquireLease(ctx, mgmtLease, "A", "a:1", ttl)
	if err != nil || !st.Held {
		t.Fatalf("A: %+v, %v", st, err)
	}
	if _, err := sa.Lead(ctx, ea.LeaseFence(mgmtLease, "A", st.Term)); !errors.Is(err, meta.ErrNotFound) {
		t.Fatalf("A leads an empty database: %v", err)
	}
	if _, err := sa.Update(ctx, func(m *clustermap.Map) error { m.Name = "A"; return nil }); err != nil {
		t.Fatalf("leader's update: %v", err)
	}
	if st, err := ea.AcquireLease(ctx, mgmtLease, "A", "a:1", short); err != nil || !st.Held {
		t.Fatalf("A renews for a short lease: %+v, %v", st, err)
	}
	time.Sleep(short + 200*time.Millisecond) // A is paused past its lease
	st, err = eb.AcquireLease(ctx, mgmtLease, "B", "b:1", ttl)
	if err != nil || !st.Held {
		t.Fatalf("B: %+v, %v", st, err)
	}
	if m, err := sb.Lead(ctx, eb.LeaseFence(mgmtLease, "B", st.Term)); err != nil || m.Epoch != 1 {
		t.Fatalf("B leads: %v, %v; want epoch 1", m, err)
	}
	if _, err := sb.Update(ctx, func(m *clustermap.Map) error { m.Meta = []string{"b:2"}; return nil }); err != nil {
		t.Fatalf("new leader's update: %v", err)
	}
	// A wakes up, still believing it leads.
	_, err = sa.Update(ctx, func(m *clustermap.Map) error { m.Name = "deposed"; return nil })
	if !errors.Is(err, postgres.ErrLeaseLost) {
		t.Fatalf("deposed leader's update: %v, want ErrLeaseLost", err)
	}
	m, err := sb.Load(ctx)
	if err != nil || m.Epoch != 2 || m.Name != "A" || strings.Join(m.Meta, ",") != "b:2" {
		t.Fatalf("stored map: %+v, %v; want epoch 2 of B", m, err)
	}
}
