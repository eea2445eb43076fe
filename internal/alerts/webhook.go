package alerts

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Webhook headers. The signature is "sha256=" and the hex HMAC-SHA256,
// keyed with the webhook secret, of the timestamp, a dot and the body:
// a receiver recomputes it (Verify) and refuses old timestamps, so that a
// recorded request cannot be replayed later.
const (
	HeaderSignature = "X-Poolfs-Signature"
	HeaderTimestamp = "X-Poolfs-Timestamp" // unix seconds
	HeaderEvent     = "X-Poolfs-Event"     // firing, resolved, test
)

// Webhook delivers notifications as JSON POSTs (the body is the
// Notification), signed with an HMAC-SHA256 of a secret. Any 2xx answer
// is a delivery; anything else is retried.
type Webhook struct {
	URL    string
	Secret []byte       // the HMAC key; never sent, logged or in errors
	Client *http.Client // nil: a client with no redirects followed
	Now    func() time.Time
}

var _ Notifier = (*Webhook)(nil)

// Channel implements Notifier.
func (w *Webhook) Channel() string { return "webhook" }

// Sign returns the signature header value of body sent at timestamp ts.
func Sign(secret []byte, ts string, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Verify reports whether sig is the signature of body at ts (constant
// time).
func Verify(secret []byte, ts string, body []byte, sig string) bool {
	return hmac.Equal([]byte(Sign(secret, ts, body)), []byte(sig))
}

// Notify implements Notifier: one POST, bounded by ctx.
func (w *Webhook) Notify(ctx context.Context, n Notification) error {
	body, err := json.Marshal(n)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("webhook: %w", stripURL(err))
	}
	now := time.Now
	if w.Now != nil {
		now = w.Now
	}
	ts := strconv.FormatInt(now().Unix(), 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "poolfs-alerts")
	req.Header.Set(HeaderTimestamp, ts)
	req.Header.Set(HeaderEvent, n.Event)
	req.Header.Set(HeaderSignature, Sign(w.Secret, ts, body))
	c := w.Client
	if c == nil {
		// A webhook that redirects is a misconfiguration, and following
		// it would send the body elsewhere.
		c = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("webhook %s: %w", w.host(), stripURL(err))
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("webhook %s: HTTP %d: %q", w.host(), resp.StatusCode, bytes.TrimSpace(msg))
	}
	return nil
}

// host is the webhook's host, for errors: the URL's path and query may
// hold a token.
func (w *Webhook) host() string {
	if u, err := url.Parse(w.URL); err == nil {
		return u.Host
	}
	return "(bad URL)"
}

// stripURL drops the URL that net/http puts in its errors.
func stripURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}
