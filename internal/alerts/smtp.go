package alerts

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/smtp"
	"strings"
	"time"
)

// Email delivers notifications by e-mail over SMTP: STARTTLS whenever the
// server offers it (required with RequireTLS), then AUTH PLAIN when a
// user name is set (net/smtp refuses to send a password in clear except
// to localhost).
type Email struct {
	Addr     string // host:port of the SMTP server
	From     string
	To       []string
	Username string
	Password string // never logged, never in errors
	// RequireTLS refuses to deliver if the server does not offer STARTTLS.
	RequireTLS bool
	// TLS configures STARTTLS (nil: the system's roots, the host of Addr).
	TLS *tls.Config
	// Hello is the name given in EHLO (default "localhost").
	Hello string
	Now   func() time.Time
}

var _ Notifier = (*Email)(nil)

// Channel implements Notifier.
func (m *Email) Channel() string { return "email" }

// Notify implements Notifier: one SMTP session, bounded by ctx.
func (m *Email) Notify(ctx context.Context, n Notification) (err error) {
	host, _, err := net.SplitHostPort(m.Addr)
	if err != nil {
		return fmt.Errorf("smtp: address %q: %w", m.Addr, err)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", m.Addr)
	if err != nil {
		return fmt.Errorf("smtp %s: %w", m.Addr, err)
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() }) // a stuck server does not outlive ctx
	defer stop()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	c, err := smtp.NewClient(conn, host)
	if err != nil {
		conn.Close()
		return fmt.Errorf("smtp %s: %w", m.Addr, err)
	}
	defer c.Close()
	wrap := func(step string, err error) error {
		if ctx.Err() != nil {
			return fmt.Errorf("smtp %s: %s: %w", m.Addr, step, ctx.Err())
		}
		return fmt.Errorf("smtp %s: %s: %w", m.Addr, step, err)
	}
	hello := m.Hello
	if hello == "" {
		hello = "localhost"
	}
	if err := c.Hello(hello); err != nil {
		return wrap("EHLO", err)
	}
	if ok, _ := c.Extension("STARTTLS"); ok {
		cfg := m.TLS
		if cfg == nil {
			cfg = &tls.Config{ServerName: host}
		}
		if err := c.StartTLS(cfg); err != nil {
			return wrap("STARTTLS", err)
		}
	} else if m.RequireTLS {
		return wrap("STARTTLS", errors.New("the server does not offer STARTTLS and require_tls is set"))
	}
	if m.Username != "" {
		if ok, _ := c.Extension("AUTH"); !ok {
			return wrap("AUTH", errors.New("the server offers no AUTH but a user name is configured"))
		}
		if err := c.Auth(smtp.PlainAuth("", m.Username, m.Password, host)); err != nil {
			return wrap("AUTH", scrub(err, m.Password))
		}
	}
	if err := c.Mail(m.From); err != nil {
		return wrap("MAIL FROM", err)
	}
	for _, to := range m.To {
		if err := c.Rcpt(to); err != nil {
			return wrap("RCPT TO "+to, err)
		}
	}
	w, err := c.Data()
	if err != nil {
		return wrap("DATA", err)
	}
	if _, err := w.Write(m.message(n)); err != nil {
		return wrap("DATA", err)
	}
	if err := w.Close(); err != nil {
		return wrap("DATA", err)
	}
	if err := c.Quit(); err != nil {
		return wrap("QUIT", err)
	}
	return nil
}

// Subject is the e-mail subject of n: "[poolfs NAME] FIRING critical:
// data.loss pool default".
func Subject(n Notification) string {
	return oneLine(fmt.Sprintf("[poolfs %s] %s %s: %s %s", n.Cluster, strings.ToUpper(n.Event), n.Alert.Severity, n.Alert.Rule, n.Alert.Subject))
}

// message is the RFC 5322 message of n, CRLF line ends.
func (m *Email) message(n Notification) []byte {
	now := time.Now
	if m.Now != nil {
		now = m.Now
	}
	a := n.Alert
	var b strings.Builder
	h := func(k, v string) { fmt.Fprintf(&b, "%s: %s\r\n", k, oneLine(v)) }
	h("From", m.From)
	h("To", strings.Join(m.To, ", "))
	h("Subject", Subject(n))
	h("Date", now().Format(time.RFC1123Z))
	h("MIME-Version", "1.0")
	h("Content-Type", "text/plain; charset=utf-8")
	h("Content-Transfer-Encoding", "8bit")
	h("X-Poolfs-Alert", a.ID)
	b.WriteString("\r\n")
	line := func(format string, args ...any) { b.WriteString(oneLine(fmt.Sprintf(format, args...)) + "\r\n") }
	line("%s", a.Message)
	line("")
	line("alert:    %s", a.ID)
	line("rule:     %s", a.Rule)
	line("subject:  %s", a.Subject)
	line("severity: %s", a.Severity)
	line("event:    %s", n.Event)
	line("started:  %s", a.Started.UTC().Format(time.RFC3339))
	if !a.Resolved.IsZero() {
		line("resolved: %s", a.Resolved.UTC().Format(time.RFC3339))
	}
	if a.AckedBy != "" {
		line("acknowledged by %s at %s", a.AckedBy, a.AckedAt.UTC().Format(time.RFC3339))
	}
	line("")
	line("poolfs alerts          # the open alerts")
	line("poolfs alerts ack %s   # acknowledge this one", a.ID)
	return []byte(b.String())
}

// oneLine replaces the line breaks in s, so that no text of an alert can
// add a header or end the message.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return ' '
		}
		return r
	}, s)
}

// scrub removes a password from an error's text (a server may echo what
// it was sent).
func scrub(err error, secret string) error {
	if secret == "" || !strings.Contains(err.Error(), secret) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), secret, "[password]"))
}
