package mgmt

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"poolfs/internal/clustermap"
	"poolfs/internal/rpc"
)

// TestLeadersFollowsTheLeader: a client given a dead address, a standby
// and the leader reaches the leader (the standby names it); when the
// leader dies and the standby leads, the client's next call waits for it
// and succeeds, and a standby's refusal is never returned to the caller.
func TestLeadersFollowsTheLeader(t *testing.T) {
	ctx := context.Background()
	store := newTestStore(t)
	secret := []byte("0123456789abcdef0123456789abcdef")
	errs := rpc.NewErrorTable(ErrorCodes()...)
	serve := func(svc *Service) (string, *rpc.Server) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := rpc.NewServer(secret, rpc.ServerOptions{Errors: errs})
		svc.Register(svc.Gate(srv))
		NewRegistry(svc).Register(svc.Gate(srv))
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
		return ln.Addr().String(), srv
	}
	leader, standby := New(store, nil, nil, nil), New(store, nil, nil, nil)
	if _, err := leader.Update(ctx, func(m *clustermap.Map) error { m.Name = "x"; return nil }); err != nil {
		t.Fatal(err)
	}
	la, lsrv := serve(leader)
	sa, _ := serve(standby)
	standby.Follow(la)
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	da := dead.Addr().String()
	dead.Close()

	l, err := NewLeaders([]string{da, sa, la}, secret, rpc.ClientOptions{Errors: errs})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c := NewLeadersClient(l)
	if m, err := c.Map(ctx); err != nil || m.Name != "x" {
		t.Fatalf("map through a dead address, a standby and the leader: %v, %v", m, err)
	}
	lsrv.Close()
	leader.Follow("")
	go func() {
		time.Sleep(500 * time.Millisecond)
		if _, err := standby.Lead(ctx, nil); err != nil {
			t.Error(err)
		}
	}()
	if err := c.RegisterMeta(ctx, "10.0.0.5:9402"); err != nil {
		t.Fatalf("call across the failover: %v", err)
	}
	m, err := standby.Map(ctx)
	if err != nil || len(m.Meta) != 1 {
		t.Fatalf("new leader's map: %+v, %v", m, err)
	}
	l.within = 300 * time.Millisecond
	standby.Follow("")
	if err := c.RegisterMeta(ctx, "10.0.0.6:9402"); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("with no leader for longer than the wait: %v, want ErrNotLeader", err)
	}
}
