package alerts

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"
)

// memStore is an in-memory Store.
type memStore struct {
	mu    sync.Mutex
	b     []byte
	aside [][]byte
	saves int
}

func (m *memStore) Load(context.Context) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.b, nil
}

func (m *memStore) Save(_ context.Context, b []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.b = append([]byte(nil), b...)
	m.saves++
	return nil
}

func (m *memStore) SaveAside(_ context.Context, b []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.aside = append(m.aside, b)
	return nil
}

// TestPersistAcrossRestart checks that open and resolved alerts, their
// acknowledgment and the ID counter survive a restart, that an alert
// still holding after the restart stays the same alert, and that a new one
// gets a new ID.
func TestPersistAcrossRestart(t *testing.T) {
	ctx := context.Background()
	store := &memStore{}
	e1, err := NewEngine(Options{Store: store, Now: func() time.Time { return t0.Add(time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	if err := e1.Load(ctx); err != nil {
		t.Fatal(err)
	}
	st := healthy(t0)
	st.Drives[0].State = "failed"
	st.Pools[0].UsedRaw = 850
	mustEval(t, e1, st) // 1 drive.failed d00, 2 pool.full
	st.Now, st.Pools[0].UsedRaw = t0.Add(time.Minute), 500
	mustEval(t, e1, st) // pool.full resolved
	if err := e1.Ack("1", "alice"); err != nil {
		t.Fatal(err)
	}
	before := e1.History(0)

	e2, err := NewEngine(Options{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	if err := e2.Load(ctx); err != nil {
		t.Fatal(err)
	}
	after := e2.History(0)
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("after restart:\n%+v\nbefore:\n%+v", after, before)
	}
	if a := after[1]; a.ID != "1" || a.AckedBy != "alice" || !a.AckedAt.Equal(t0.Add(time.Hour)) || !a.Open() {
		t.Fatalf("alert 1 after restart: %+v", a)
	}
	st.Now = t0.Add(2 * time.Minute)
	st.Drives[2].State = "failed"
	mustEval(t, e2, st) // d00 still failed: same alert 1; d02 new: 3
	open := e2.Open()
	if len(open) != 2 || open[0].ID != "1" || open[1].ID != "3" {
		t.Fatalf("open after restart: %+v, want alerts 1 (kept) and 3 (new)", open)
	}
}

// TestTrendSurvivesRestart checks that the fill trend is saved (at least
// every trendSave, with no alert changing) and that an engine restarted
// on it judges the time to full without waiting for a new span.
func TestTrendSurvivesRestart(t *testing.T) {
	store := &memStore{}
	e1, _ := NewEngine(Options{Store: store})
	for i := range 40 { // 40 minutes at 500 of 1000: flat, no alert
		mustEval(t, e1, healthy(t0.Add(time.Duration(i)*time.Minute)))
	}
	if len(e1.Open()) != 0 {
		t.Fatalf("open %+v", e1.Open())
	}
	e2, _ := NewEngine(Options{Store: store})
	if err := e2.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := healthy(t0.Add(40 * time.Minute))
	st.Pools[0].UsedRaw = 700 // a jump: the saved samples and this one give a steep line
	mustEval(t, e2, st)
	if open := e2.Open(); len(open) != 1 || open[0].Rule != RuleTimeToFull {
		t.Fatalf("open after restart %+v: want pool.time-to-full from the saved trend", open)
	}
	fresh, _ := NewEngine(Options{})
	mustEval(t, fresh, st)
	if open := fresh.Open(); len(open) != 0 {
		t.Fatalf("an engine with no trend alerted: %+v", open)
	}
}

// TestAck checks the acknowledgment rules.
func TestAck(t *testing.T) {
	e, err := NewEngine(Options{Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	st := healthy(t0)
	st.Drives[0].State = "failed"
	mustEval(t, e, st)
	if err := e.Ack("1", ""); !errors.Is(err, ErrInvalid) {
		t.Fatalf("ack with no user: %v", err)
	}
	if err := e.Ack("9", "bob"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("ack of no alert: %v", err)
	}
	if err := e.Ack("1", "bob"); err != nil {
		t.Fatal(err)
	}
	if err := e.Ack("1", "carol"); err != nil {
		t.Fatal(err)
	}
	if a, _ := e.Get("1"); a.AckedBy != "bob" || !a.AckedAt.Equal(t0) {
		t.Fatalf("acked %+v: want bob's first acknowledgment kept", a)
	}
	mustEval(t, e, healthy(t0.Add(time.Minute)))
	if err := e.Ack("1", "bob"); !errors.Is(err, ErrResolved) {
		t.Fatalf("ack of a resolved alert: %v", err)
	}
	if a, _ := e.Get("1"); a.Open() || a.AckedBy != "bob" {
		t.Fatalf("resolved alert %+v", a)
	}
}

// TestHistoryBounded checks that resolved alerts beyond MaxHistory are
// dropped oldest first, and open ones kept.
func TestHistoryBounded(t *testing.T) {
	store := &memStore{}
	e, err := NewEngine(Options{MaxHistory: 3, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	stuck := healthy(t0)
	stuck.Drives[3].State = "failed" // alert 1, open throughout
	mustEval(t, e, stuck)
	for i := range 5 {
		st := healthy(t0.Add(time.Duration(2*i+1) * time.Minute))
		st.Drives[3].State = "failed"
		st.Drives[0].Slow = "slow"
		mustEval(t, e, st) // alert 2+i opens
		st.Now, st.Drives[0].Slow = st.Now.Add(time.Minute), ""
		mustEval(t, e, st) // and resolves
	}
	var ids []string
	for _, a := range e.History(0) {
		ids = append(ids, a.ID)
	}
	if !reflect.DeepEqual(ids, []string{"6", "5", "4", "1"}) {
		t.Fatalf("history IDs %v, want the 3 newest resolved and the open one", ids)
	}
	e2, _ := NewEngine(Options{Store: store})
	if err := e2.Load(context.Background()); err != nil || len(e2.History(0)) != 4 {
		t.Fatalf("reloaded: %v, %d alerts", err, len(e2.History(0)))
	}
}

// TestLoadCorruptKeptAside checks that a record that does not decode is
// kept aside before anything replaces it.
func TestLoadCorruptKeptAside(t *testing.T) {
	bad := []byte(`{"version":1,"next_id":2,"alerts":[{"id":"1","rule":"drive.failed","severity":"bad"}]}`)
	store := &memStore{b: bad}
	e, err := NewEngine(Options{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(store.aside) != 1 || string(store.aside[0]) != string(bad) || store.saves != 0 {
		t.Fatalf("aside %q, saves %d: want the bad record kept aside and not yet overwritten", store.aside, store.saves)
	}
}

func TestDecodeRecordRejects(t *testing.T) {
	for name, s := range map[string]string{
		"not json":      `{`,
		"version":       `{"version":2,"next_id":1}`,
		"id above next": `{"version":1,"next_id":2,"alerts":[{"id":"2","rule":"r","severity":"warning"}]}`,
		"id not number": `{"version":1,"next_id":9,"alerts":[{"id":"x","rule":"r","severity":"warning"}]}`,
		"id order":      `{"version":1,"next_id":9,"alerts":[{"id":"3","rule":"r","severity":"warning","resolved":"2026-01-01T00:00:00Z"},{"id":"2","rule":"r","severity":"warning"}]}`,
		"two open":      `{"version":1,"next_id":9,"alerts":[{"id":"1","rule":"r","subject":"s","severity":"warning"},{"id":"2","rule":"r","subject":"s","severity":"critical"}]}`,
		"no rule":       `{"version":1,"next_id":9,"alerts":[{"id":"1","severity":"warning"}]}`,
		"leading zero":  `{"version":1,"next_id":9,"alerts":[{"id":"01","rule":"r","severity":"warning"}]}`,
	} {
		if _, err := decodeRecord([]byte(s)); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: decodeRecord = %v, want ErrInvalid", name, err)
		}
	}
}

// FuzzDecodeRecord checks that any bytes either fail to decode or give a
// record that the engine loads, saves and reloads to the same alerts.
func FuzzDecodeRecord(f *testing.F) {
	good, _ := json.Marshal(record{Version: 1, NextID: 3, Alerts: []Alert{
		{ID: "1", Rule: RuleDriveFailed, Subject: "drive d01", Severity: Warning, Message: "m", Started: t0, Updated: t0,
			AckedBy: "alice", AckedAt: t0, Deliveries: []Delivery{{Channel: "webhook", Event: EventFiring, Attempts: 2, Error: "500"}}},
		{ID: "2", Rule: RulePoolFull, Subject: "pool p", Severity: Critical, Started: t0, Updated: t0, Resolved: t0},
	}, Trend: map[string][]Sample{"p": {{T: t0, Used: 5}}}})
	f.Add(good)
	f.Add([]byte(`{"version":1,"next_id":1}`))
	f.Add([]byte(`{"version":1,"next_id":5,"alerts":[{"id":"4","rule":"x","severity":"warning"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := decodeRecord(b); err != nil {
			return
		}
		store := &memStore{b: b}
		e, err := NewEngine(Options{Store: store})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Load(context.Background()); err != nil || len(store.aside) != 0 {
			t.Fatalf("load of a record that decodes: %v (aside %d)", err, len(store.aside))
		}
		before := e.History(0)
		if err := e.save(context.Background()); err != nil {
			t.Fatal(err)
		}
		e2, _ := NewEngine(Options{Store: store})
		if err := e2.Load(context.Background()); err != nil || len(store.aside) != 0 {
			t.Fatalf("reload: %v (aside %d)", err, len(store.aside))
		}
		if after := e2.History(0); len(after) != len(before) {
			t.Fatalf("reload: %d alerts, saved %d", len(after), len(before))
		}
	})
}
