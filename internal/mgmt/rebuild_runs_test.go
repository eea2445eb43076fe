package mgmt

import (
	"context"
	"strings"
	"testing"
	"time"

	"poolfs/internal/clustermap"
	"poolfs/internal/mgmt/rebuild"
	"poolfs/internal/placement"
)

// TestRebuildRunCarriedOverByNextLeader: a rebuild run started by one
// service (its record written as the coordinator writes it at a run's
// start, in blob rebuild.runs) is active in the status of the service that
// leads next, with the same kind and start; when the next leader's first
// pass finds nothing left to do and finishes it, the end event
// counts the whole run and the record is gone, so a third leader has no
// run under way.
func TestRebuildRunCarriedOverByNextLeader(t *testing.T) {
	ctx := context.Background()
	store := newTestStore(t)
	first := New(store, nil, nil, nil)
	if _, err := first.Update(ctx, func(m *clustermap.Map) error {
		m.Name = "t"
		m.Servers = []clustermap.Server{{ID: "s0", Addr: "x"}}
		var ids []placement.DriveID
		for i := range 4 {
			id := placement.DriveID(i)
			ids = append(ids, id)
			m.Drives = append(m.Drives, clustermap.Drive{ID: id, Server: "s0", State: clustermap.StateUp, Capacity: 1 << 30, Pool: 3})
		}
		m.Pools = []clustermap.Pool{{ID: 3, Name: "p", K: 2, M: 1, Unit: 1 << 16, Drives: ids,
			PGs: placement.DefaultPGs(4, 3), Layout: placement.Declustered}}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	started := time.Now().Add(-time.Minute).UnixNano()
	if err := (blobRuns[rebuild.Record]{first.store, runsBlob}).Set(ctx, "3", rebuild.Record{Kind: "rebuild", Started: started}, false); err != nil {
		t.Fatal(err)
	}

	next := New(store, nil, nil, nil)
	if _, err := next.Lead(ctx, nil); err != nil {
		t.Fatal(err)
	}
	st := next.Rebuild()
	if !st.Active || st.Kind != "rebuild" || st.Started != started || st.Pool != 3 {
		t.Fatalf("next leader's rebuild status: active %v kind %q started %d pool %d; want the first's run", st.Active, st.Kind, st.Started, st.Pool)
	}
	// The pool has no stripes: the next leader's first pass finds nothing
	// left to do and ends the run.
	if again, err := next.rb.Pass(ctx); err != nil || again {
		t.Fatalf("pass: again %v, %v", again, err)
	}
	evs, err := store.Events(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	done := 0
	for _, ev := range evs {
		if ev.Kind == EventRebuildDone && strings.Contains(ev.Message, "rebuild finished in 1m") {
			done++
		}
	}
	if done != 1 {
		t.Fatalf("want one %s event counting the whole run (1m): %+v", EventRebuildDone, evs)
	}
	third := New(store, nil, nil, nil)
	if _, err := third.Lead(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if st := third.Rebuild(); st.Active {
		t.Fatalf("a finished run is active for the third leader: %+v", st)
	}
}
