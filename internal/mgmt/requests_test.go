package mgmt

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"poolfs/internal/chunkstore/drivetest"
	"poolfs/internal/clustermap"
	"poolfs/internal/rpc"
)

// handlers keeps the RPC handlers a service registers.
type handlers map[string]rpc.HandlerFunc

func (h handlers) Handle(method string, fn rpc.HandlerFunc) { h[method] = fn }

// call runs method with args as the RPC server would and returns the
// answer as JSON.
func (h handlers) call(t *testing.T, method string, args any) ([]byte, error) {
	t.Helper()
	a, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	res, err := h[method](context.Background(), &rpc.Request{Method: method, Args: a})
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(res.Result)
	if err != nil {
		t.Fatal(err)
	}
	return b, nil
}

// TestRepeatedRequestRunsOnce: a state-changing call delivered twice with
// one request id (a retry after the answer was lost) has one effect and
// gets the same answer both times, also from the service that leads next;
// a new id is a new call.
func TestRepeatedRequestRunsOnce(t *testing.T) {
	ctx := context.Background()
	store := newTestStore(t)
	drives := drivetest.NewDrives(8)
	a := New(store, drivetest.UpOnly(drives), nil, nil)
	if _, err := a.Update(ctx, func(m *clustermap.Map) error {
		m.Name = "t"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ha := handlers{}
	a.Register(ha)
	nDrives := func(s *Service) int {
		t.Helper()
		m, err := s.Map(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return len(m.Drives)
	}
	pool := PoolSpec{Name: "p", K: 2, M: 1, Drives: 5, Unit: 64 << 10, DriveSize: 1 << 30, Force: true, Request: "create-1"}
	first, err := ha.call(t, "mgmt.CreatePool", pool)
	if err != nil {
		t.Fatal(err)
	}
	again, err := ha.call(t, "mgmt.CreatePool", pool)
	if err != nil || !bytes.Equal(first, again) {
		t.Fatalf("the create repeated: %v; answer equal to the first's: %v", err, bytes.Equal(first, again))
	}
	if n := nDrives(a); n != 5 {
		t.Fatalf("%d drives after the create repeated, want 5", n)
	}

	add := DriveArgs{Pool: "p", Request: "add-1"}
	first, err = ha.call(t, "mgmt.AddDrive", add)
	if err != nil {
		t.Fatal(err)
	}
	again, err = ha.call(t, "mgmt.AddDrive", add)
	if err != nil || !bytes.Equal(first, again) {
		t.Fatalf("the add repeated: %s, %v; want %s", again, err, first)
	}
	if n := nDrives(a); n != 6 {
		t.Fatalf("%d drives after one add delivered twice, want 6", n)
	}

	scrub := ScrubArgs{Op: "start", Pool: "p", Request: "scrub-1"}
	if _, err := ha.call(t, "mgmt.Scrub", scrub); err != nil {
		t.Fatal(err)
	}
	if _, err := ha.call(t, "mgmt.Scrub", scrub); err != nil {
		t.Fatalf("the scrub start repeated: %v", err)
	}
	a.StopScrub()

	// The next leader remembers the answers too.
	b := New(store, drivetest.UpOnly(drives), nil, nil)
	if _, err := b.Lead(ctx, nil); err != nil {
		t.Fatal(err)
	}
	hb := handlers{}
	b.Register(hb)
	again, err = hb.call(t, "mgmt.AddDrive", add)
	if err != nil || !bytes.Equal(first, again) {
		t.Fatalf("the add repeated to the next leader: %s, %v; want %s", again, err, first)
	}
	if n := nDrives(b); n != 6 {
		t.Fatalf("%d drives after the add was repeated to the next leader, want 6", n)
	}
	add.Request = "add-2"
	if _, err := hb.call(t, "mgmt.AddDrive", add); err != nil {
		t.Fatal(err)
	}
	if n := nDrives(b); n != 7 {
		t.Fatalf("%d drives after a second add, want 7", n)
	}
}
