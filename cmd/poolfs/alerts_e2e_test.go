package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"poolfs/internal/alerts"
)

// webhookSink is a webhook receiver that keeps the notifications whose
// signature verifies.
type webhookSink struct {
	secret []byte
	mu     sync.Mutex
	got    []alerts.Notification
	bad    int
}

func (s *webhookSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	var n alerts.Notification
	if !alerts.Verify(s.secret, r.Header.Get(alerts.HeaderTimestamp), body, r.Header.Get(alerts.HeaderSignature)) || json.Unmarshal(body, &n) != nil {
		s.bad++
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	s.got = append(s.got, n)
}

// wait returns the first notification matching event, rule and subject.
func (s *webhookSink) wait(t *testing.T, event, rule, subject string) alerts.Notification {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		s.mu.Lock()
		for _, n := range s.got {
			if n.Event == event && n.Alert.Rule == rule && n.Alert.Subject == subject {
				s.mu.Unlock()
				return n
			}
		}
		s.mu.Unlock()
		time.Sleep(50 * time.Millisecond)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t.Fatalf("no %s notification of %s %s in 30s; got %+v (%d with a bad signature)", event, rule, subject, s.got, s.bad)
	return alerts.Notification{}
}

func alertsJSON(t *testing.T, args ...string) []alerts.Alert {
	t.Helper()
	var as []alerts.Alert
	out := run(t, append([]string{"alerts", "--json"}, args...)...)
	if err := json.Unmarshal([]byte(out), &as); err != nil {
		t.Fatalf("poolfs alerts --json: %v\n%s", err, out)
	}
	return as
}

func findAlert(as []alerts.Alert, rule, subject string) *alerts.Alert {
	for i := range as {
		if as[i].Rule == rule && as[i].Subject == subject {
			return &as[i]
		}
	}
	return nil
}

// TestAlertsEndToEnd runs `poolfs up` with a webhook in alerts.json: a
// failed drive opens an alert that reaches the webhook signed; `poolfs
// alerts` lists it and `poolfs alerts ack` acknowledges it; replacing the
// drive (its data rebuilt, read back byte for byte) resolves it, which the
// webhook receives too; the history survives a restart.
func TestAlertsEndToEnd(t *testing.T) {
	secret := "e2e-webhook-secret-0123456789"
	sink := &webhookSink{secret: []byte(secret)}
	srv := httptest.NewServer(sink)
	defer srv.Close()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hook-secret"), []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`{"interval":"200ms","thresholds":{"resolve_after":"0s"},"delivery":{"backoff":"50ms","max_backoff":"200ms"},
		"webhook":{"url":%q,"secret_file":"hook-secret"}}`, srv.URL+"/poolfs")
	if err := os.WriteFile(filepath.Join(dir, alerts.ConfigFile), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	up := startUp(t, dir, "--drives", "8", "--scheme", "4+2", "--unit", "64K", "--drive-size", "1G")
	src := filepath.Join(t.TempDir(), "src")
	data := writeRandom(t, src, 1<<20+333)
	run(t, "put", "-c", dir, "-q", src, "/f")
	if out := run(t, "alerts", "-c", dir); out != "no open alerts\n" {
		t.Fatalf("poolfs alerts on a healthy cluster:\n%s", out)
	}
	if out := run(t, "alerts", "test-delivery", "-c", dir); out != "webhook: delivered\n" {
		t.Fatalf("poolfs alerts test-delivery:\n%s", out)
	}
	sink.wait(t, alerts.EventTest, alerts.RuleTest, "cluster "+filepath.Base(dir))

	run(t, "drive", "fail", "-c", dir, "d03")
	fired := sink.wait(t, alerts.EventFiring, alerts.RuleDriveFailed, "drive d03")
	if fired.Alert.Severity != alerts.Warning || !strings.Contains(fired.Alert.Message, "poolfs drive replace d03") {
		t.Fatalf("firing notification %+v", fired.Alert)
	}
	listed := func(out string) bool {
		return strings.Contains(out, fired.Alert.ID+"  ") && strings.Contains(out, "drive.failed") && strings.Contains(out, "webhook sent")
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		out := run(t, "alerts", "-c", dir) // the delivery is recorded just after the webhook answered
		if listed(out) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("poolfs alerts does not list alert %s as delivered:\n%s", fired.Alert.ID, out)
		}
	}
	out := run(t, "alerts", "ack", "-c", dir, "--user", "alice", fired.Alert.ID)
	if !strings.Contains(out, "acknowledged by alice") {
		t.Fatalf("poolfs alerts ack: %s", out)
	}
	if a := findAlert(alertsJSON(t, "-c", dir), alerts.RuleDriveFailed, "drive d03"); a == nil || a.AckedBy != "alice" || a.AckedAt.IsZero() {
		t.Fatalf("open alert after ack: %+v", a)
	}
	if out := fails(t, "alerts", "ack", "-c", dir, "999"); !strings.Contains(out, "no such alert") {
		t.Fatalf("ack of an unknown alert: %s", out)
	}

	run(t, "drive", "replace", "-c", dir, "d03")
	resolved := sink.wait(t, alerts.EventResolved, alerts.RuleDriveFailed, "drive d03")
	if resolved.Alert.ID != fired.Alert.ID || resolved.Alert.AckedBy != "alice" || resolved.Alert.Resolved.IsZero() {
		t.Fatalf("resolved notification %+v: want alert %s, acknowledged by alice", resolved.Alert, fired.Alert.ID)
	}
	got := filepath.Join(t.TempDir(), "got")
	run(t, "get", "-c", dir, "-q", "/f", got)
	if b, err := os.ReadFile(got); err != nil || !bytes.Equal(b, data) {
		t.Fatalf("file after the rebuild: %d bytes, %v", len(b), err)
	}

	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		a := findAlert(alertsJSON(t, "-c", dir, "--all"), alerts.RuleDriveFailed, "drive d03")
		if a != nil && len(a.Deliveries) == 2 && !a.Deliveries[1].Sent.IsZero() {
			break // the resolved notification is recorded as sent
		}
		if time.Now().After(deadline) {
			t.Fatalf("resolved delivery not recorded: %+v", a)
		}
	}
	up.stop(t)
	startUp(t, dir)
	a := findAlert(alertsJSON(t, "-c", dir, "--all"), alerts.RuleDriveFailed, "drive d03")
	if a == nil || a.ID != fired.Alert.ID || a.Open() || a.AckedBy != "alice" {
		t.Fatalf("history after a restart: %+v", a)
	}
	if len(a.Deliveries) != 2 || a.Deliveries[0].Sent.IsZero() || a.Deliveries[1].Sent.IsZero() {
		t.Fatalf("deliveries after a restart: %+v, want firing and resolved sent", a.Deliveries)
	}
}
