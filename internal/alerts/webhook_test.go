package alerts

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// hook is a webhook receiver: it checks each request's signature and
// answers the status codes of codes in turn (200 once they run out).
type hook struct {
	t      *testing.T
	secret []byte
	mu     sync.Mutex
	codes  []int
	got    []Notification // requests with a valid signature
	bad    int            // requests without
	calls  chan struct{}
	block  chan struct{} // if set, each request waits on it
}

func newHook(t *testing.T, secret string, codes ...int) (*hook, *httptest.Server) {
	h := &hook{t: t, secret: []byte(secret), codes: codes, calls: make(chan struct{}, 100)}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return h, srv
}

func (h *hook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() { h.calls <- struct{}{} }()
	if h.block != nil {
		<-h.block
	}
	body, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	defer h.mu.Unlock()
	ts := r.Header.Get(HeaderTimestamp)
	var n Notification
	if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" ||
		!Verify(h.secret, ts, body, r.Header.Get(HeaderSignature)) || json.Unmarshal(body, &n) != nil || r.Header.Get(HeaderEvent) != n.Event {
		h.bad++
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	h.got = append(h.got, n)
	code := http.StatusOK
	if len(h.codes) > 0 {
		code, h.codes = h.codes[0], h.codes[1:]
	}
	w.WriteHeader(code)
}

func (h *hook) wait(n int) {
	h.t.Helper()
	for range n {
		select {
		case <-h.calls:
		case <-time.After(10 * time.Second):
			h.t.Fatalf("webhook: no request in 10s")
		}
	}
}

func fastPolicy(attempts int) DeliveryPolicy {
	return DeliveryPolicy{Attempts: attempts, Timeout: Duration(5 * time.Second), Backoff: Duration(10 * time.Millisecond),
		MaxBackoff: Duration(20 * time.Millisecond)}
}

func run(t *testing.T, e *Engine) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); e.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// TestWebhookDelivery checks a firing and a resolved notification, signed,
// the first retried after an HTTP 500, and the delivery record of each.
func TestWebhookDelivery(t *testing.T) {
	const secret = "0123456789abcdef-webhook"
	h, srv := newHook(t, secret, 500)
	store := &memStore{}
	e, err := NewEngine(Options{Store: store, Cluster: "c1", Delivery: fastPolicy(3),
		Notifiers: []Notifier{&Webhook{URL: srv.URL + "/hook?token=x", Secret: []byte(secret)}}})
	if err != nil {
		t.Fatal(err)
	}
	run(t, e)
	st := healthy(t0)
	st.Drives[1].State = "failed"
	mustEval(t, e, st)
	h.wait(2) // a 500, then the retry
	mustEval(t, e, healthy(t0.Add(time.Minute)))
	h.wait(1)
	h.mu.Lock()
	got, bad := h.got, h.bad
	h.mu.Unlock()
	if bad != 0 || len(got) != 3 {
		t.Fatalf("webhook got %d valid and %d invalid requests, want 3 valid", len(got), bad)
	}
	for i, want := range []string{EventFiring, EventFiring, EventResolved} {
		n := got[i]
		if n.Event != want || n.Cluster != "c1" || n.Alert.ID != "1" || n.Alert.Rule != RuleDriveFailed || n.Alert.Subject != "drive d01" {
			t.Fatalf("request %d: %+v, want %s of alert 1 drive.failed drive d01", i, n, want)
		}
	}
	if got[2].Alert.Resolved.IsZero() {
		t.Fatalf("resolved notification without its resolution time: %+v", got[2].Alert)
	}
	waitFor(t, func() bool {
		a, _ := e.Get("1")
		return len(a.Deliveries) == 2 && !a.Deliveries[1].Sent.IsZero()
	})
	a, _ := e.Get("1")
	if d := a.Deliveries[0]; d.Channel != "webhook" || d.Event != EventFiring || d.Attempts != 2 || d.Sent.IsZero() || d.GaveUp {
		t.Fatalf("firing delivery %+v: want sent on the second attempt", d)
	}
	if d := a.Deliveries[1]; d.Event != EventResolved || d.Attempts != 1 || d.Sent.IsZero() {
		t.Fatalf("resolved delivery %+v", d)
	}
	if b, _ := store.Load(context.Background()); strings.Contains(string(b), secret) || len(b) == 0 {
		t.Fatal("the webhook secret is in the saved record")
	}
}

// TestWebhookGivesUpWithoutBlocking checks that a receiver that hangs does
// not hold up evaluation, and that one that keeps failing is given up
// after the policy's attempts, with the error recorded and saved.
func TestWebhookGivesUpWithoutBlocking(t *testing.T) {
	const secret = "0123456789abcdef-webhook"
	h, srv := newHook(t, secret, 500, 503, 500)
	h.block = make(chan struct{})
	store := &memStore{}
	e, err := NewEngine(Options{Store: store, Delivery: fastPolicy(2),
		Notifiers: []Notifier{&Webhook{URL: srv.URL, Secret: []byte(secret)}}})
	if err != nil {
		t.Fatal(err)
	}
	run(t, e)
	st := healthy(t0)
	st.Drives[1].State = "failed"
	mustEval(t, e, st)
	for i := range 5 { // the receiver holds the first request meanwhile
		st.Now = t0.Add(time.Duration(i) * time.Second)
		st.Drives[2].Slow = map[bool]string{true: "slow"}[i%2 == 0]
		mustEval(t, e, st)
	}
	close(h.block)
	waitFor(t, func() bool {
		a, _ := e.Get("1")
		return len(a.Deliveries) == 1 && a.Deliveries[0].GaveUp
	})
	a, _ := e.Get("1")
	if d := a.Deliveries[0]; d.Attempts != 2 || !strings.Contains(d.Error, "HTTP 503") || !d.Sent.IsZero() || strings.Contains(d.Error, srv.URL) {
		t.Fatalf("delivery %+v: want given up after 2 attempts, the last error HTTP 503 (host only)", d)
	}
	e2, _ := NewEngine(Options{Store: store})
	if err := e2.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	if a, _ := e2.Get("1"); len(a.Deliveries) != 1 || !a.Deliveries[0].GaveUp {
		t.Fatalf("saved delivery record %+v", a.Deliveries)
	}
}

// TestPendingDeliveryAfterRestart checks that a notification not yet
// delivered when the engine stopped is delivered after a restart.
func TestPendingDeliveryAfterRestart(t *testing.T) {
	const secret = "0123456789abcdef-webhook"
	store := &memStore{}
	dead := &Webhook{URL: "http://127.0.0.1:1/", Secret: []byte(secret)} // nothing listens on port 1
	e1, err := NewEngine(Options{Store: store, Delivery: fastPolicy(3), Notifiers: []Notifier{dead}})
	if err != nil {
		t.Fatal(err)
	}
	st := healthy(t0)
	st.Drives[0].State = "failed"
	mustEval(t, e1, st) // never run: the delivery stays pending
	h, srv := newHook(t, secret)
	e2, err := NewEngine(Options{Store: store, Delivery: fastPolicy(3), Notifiers: []Notifier{&Webhook{URL: srv.URL, Secret: []byte(secret)}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e2.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	run(t, e2)
	h.wait(1)
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.got) != 1 || h.got[0].Alert.ID != "1" || h.got[0].Event != EventFiring {
		t.Fatalf("after restart the receiver got %+v", h.got)
	}
}

func TestTestDelivery(t *testing.T) {
	const secret = "0123456789abcdef-webhook"
	h, srv := newHook(t, secret)
	e, err := NewEngine(Options{Cluster: "c1", Notifiers: []Notifier{&Webhook{URL: srv.URL, Secret: []byte(secret)},
		&Webhook{URL: "http://127.0.0.1:1/", Secret: []byte(secret)}}})
	if err != nil {
		t.Fatal(err)
	}
	res := e.TestDelivery(context.Background())
	if len(res) != 2 || res[0].Channel != "webhook" || res[0].Err != nil || res[1].Err == nil {
		t.Fatalf("results %+v: want the first delivered, the second failed", res)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.got) != 1 || h.got[0].Event != EventTest || h.got[0].Alert.Rule != RuleTest {
		t.Fatalf("receiver got %+v, want one test notification", h.got)
	}
	if len(e.History(0)) != 0 {
		t.Fatal("a test notification left an alert")
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// gate delivers its first notification and holds every later one until
// its context ends.
type gate struct {
	mu sync.Mutex
	n  int
}

func (g *gate) Channel() string { return "gate" }
func (g *gate) Notify(ctx context.Context, n Notification) error {
	g.mu.Lock()
	g.n++
	first := g.n == 1
	g.mu.Unlock()
	if first {
		return nil
	}
	<-ctx.Done()
	return ctx.Err()
}

// TestDeliveryRecordsInOrder checks that the outcome of a channel's
// notification is written into the delivery it belongs to (the oldest
// pending one of its channel and event), not a later one of the same
// alert.
func TestDeliveryRecordsInOrder(t *testing.T) {
	g := &gate{}
	e, err := NewEngine(Options{Delivery: fastPolicy(1), Notifiers: []Notifier{g}})
	if err != nil {
		t.Fatal(err)
	}
	st := healthy(t0)
	st.Pools[0].UsedRaw = 850
	mustEval(t, e, st) // firing (warning)
	st.Now, st.Pools[0].UsedRaw = t0.Add(time.Second), 950
	mustEval(t, e, st) // firing again (critical)
	run(t, e)
	waitFor(t, func() bool {
		a, _ := e.Get("1")
		return !a.Deliveries[0].Sent.IsZero() || !a.Deliveries[1].Sent.IsZero()
	})
	a, _ := e.Get("1")
	if d := a.Deliveries; d[0].Sent.IsZero() || d[0].Attempts != 1 || !d[1].Sent.IsZero() {
		t.Fatalf("deliveries %+v: want the first sent, the second not", d)
	}
}

// TestWebhookNoRedirect checks that a webhook answering with a redirect
// is a failed delivery: the body is not sent where it points.
func TestWebhookNoRedirect(t *testing.T) {
	const secret = "0123456789abcdef-webhook"
	h, target := newHook(t, secret)
	redirect := httptest.NewServer(http.RedirectHandler(target.URL, http.StatusTemporaryRedirect))
	defer redirect.Close()
	w := &Webhook{URL: redirect.URL, Secret: []byte(secret)}
	err := w.Notify(context.Background(), Notification{Event: EventTest, Alert: Alert{ID: "test"}})
	if err == nil || !strings.Contains(err.Error(), "HTTP 307") {
		t.Fatalf("redirecting webhook: %v, want HTTP 307", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.got)+h.bad != 0 {
		t.Fatal("the notification followed the redirect")
	}
}
