package mgmt

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"poolfs/internal/clustermap"
)

func serverSpec(name string, drives int) ServerSpec {
	s := ServerSpec{ID: name, Addr: "198.18.0.9:9500", Enclosure: "e-" + name}
	for i := range drives {
		s.Drives = append(s.Drives, DriveSpec{Path: fmt.Sprintf("/srv/%s/d%d", name, i), Capacity: 1 << 30})
	}
	return s
}

func TestRegistryMakesAPoolOfServersAndAdmitsLaterOnes(t *testing.T) {
	ctx := context.Background()
	svc := New(newTestStore(t), nil, nil, nil)
	if _, err := svc.Update(ctx, func(m *clustermap.Map) error { m.Name = "lab"; return nil }); err != nil {
		t.Fatal(err)
	}
	r := NewRegistry(svc)
	for _, name := range []string{"s1", "s2", "s3"} {
		out, err := r.RegisterServer(ctx, serverSpec(name, 3))
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range out.Drives {
			if !d.Pending {
				t.Fatalf("%s: drive %s served before any pool exists", name, d.Path)
			}
		}
	}
	if _, err := r.CreatePool(ctx, PoolOfServers{Name: "default", K: 8, M: 2, Unit: 1 << 20, Preservation: -1}); err == nil {
		t.Fatal("made an 8+2 pool of 9 drives")
	}
	m, err := r.CreatePool(ctx, PoolOfServers{Name: "default", K: 4, M: 2, Unit: 1 << 20, Preservation: -1})
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := m.PoolByName("default"); p == nil || len(p.Drives) != 9 {
		t.Fatalf("pool of %v", m.Pools)
	}
	for _, d := range m.Drives {
		if want := []string{"", "e-" + d.Server, d.Server}; !slices.Equal(d.Domain, want) {
			t.Fatalf("drive %v domain %v, want %v", d.ID, d.Domain, want)
		}
	}
	// Registering again serves the drives, same IDs, and changes nothing.
	again, err := r.RegisterServer(ctx, serverSpec("s2", 3))
	if err != nil {
		t.Fatal(err)
	}
	if again.Epoch != m.Epoch {
		t.Fatalf("a repeated registration made epoch %d from %d", again.Epoch, m.Epoch)
	}
	for _, d := range again.Drives {
		if md := driveAt(m, "s2", d.Path); d.Pending || md == nil || md.ID != d.ID {
			t.Fatalf("s2 drive %s: %+v", d.Path, d)
		}
	}
	// A server that joins later puts its drives into the pool at once.
	late, err := r.RegisterServer(ctx, serverSpec("s4", 2))
	if err != nil {
		t.Fatal(err)
	}
	m, _ = svc.Map(ctx)
	if p, _ := m.PoolByName("default"); len(p.Drives) != 11 || late.Drives[1].Pending {
		t.Fatalf("late server: %+v, pool %v", late, p.Drives)
	}
	if err := r.RegisterMeta(ctx, "198.18.0.3:9402"); err != nil {
		t.Fatal(err)
	}
	if m, _ = svc.Map(ctx); !slices.Equal(m.Meta, []string{"198.18.0.3:9402"}) {
		t.Fatalf("meta servers %v", m.Meta)
	}
	if _, err := r.RegisterServer(ctx, ServerSpec{ID: "bad", Addr: "nowhere", Drives: serverSpec("x", 1).Drives}); err == nil {
		t.Fatal("registered a server without a port")
	}
}

// TestRegistryPendingSurvivesTakeOver: drives registered with one
// management service and waiting for a pool are made a pool by another
// over the same store (a standby that took over), without the servers
// registering again.
func TestRegistryPendingSurvivesTakeOver(t *testing.T) {
	ctx := context.Background()
	store := newTestStore(t)
	first := New(store, nil, nil, nil)
	if _, err := first.Update(ctx, func(m *clustermap.Map) error { m.Name = "lab"; return nil }); err != nil {
		t.Fatal(err)
	}
	r := NewRegistry(first)
	for _, name := range []string{"s1", "s2", "s3"} {
		if _, err := r.RegisterServer(ctx, serverSpec(name, 3)); err != nil {
			t.Fatal(err)
		}
	}
	next := New(store, nil, nil, nil)
	if _, err := next.Lead(ctx, nil); err != nil {
		t.Fatal(err)
	}
	m, err := NewRegistry(next).CreatePool(ctx, PoolOfServers{Name: "default", K: 4, M: 2, Unit: 1 << 20, Preservation: -1})
	if err != nil {
		t.Fatalf("pool made by the service that took over: %v", err)
	}
	if p, _ := m.PoolByName("default"); p == nil || len(p.Drives) != 9 {
		t.Fatalf("pool of %v", m.Pools)
	}
	// Served drives wait no more: their servers' next registrations clear them.
	for _, name := range []string{"s1", "s2", "s3"} {
		if _, err := NewRegistry(next).RegisterServer(ctx, serverSpec(name, 3)); err != nil {
			t.Fatal(err)
		}
	}
	if p, _, err := NewRegistry(next).pending(ctx); err != nil || len(p) != 0 {
		t.Fatalf("pending after the pool was made: %v, %v", p, err)
	}
}
