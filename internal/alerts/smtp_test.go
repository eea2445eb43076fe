package alerts

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"math/big"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// smtpServer is a minimal SMTP server on loopback: EHLO, STARTTLS (when
// tls is set), AUTH PLAIN, MAIL, RCPT, DATA, QUIT. It records each
// message with what the session looked like.
type smtpServer struct {
	ln   net.Listener
	tls  *tls.Config
	user string
	pass string
	mu   sync.Mutex
	msgs []smtpMessage
}

type smtpMessage struct {
	tls        bool
	authed     string // the user name that authenticated ("": none)
	from       string
	to         []string
	data       string
	authFailed bool
}

func startSMTP(t *testing.T, tlsCfg *tls.Config, user, pass string) *smtpServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &smtpServer{ln: ln, tls: tlsCfg, user: user, pass: pass}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); s.serve(c) }()
		}
	}()
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	return s
}

func (s *smtpServer) serve(c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	r, w := bufio.NewReader(c), bufio.NewWriter(c)
	say := func(line string) { w.WriteString(line + "\r\n"); w.Flush() }
	var m smtpMessage
	say("220 test ESMTP")
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		line = strings.TrimRight(line, "\r\n")
		verb := strings.ToUpper(strings.SplitN(line, " ", 2)[0])
		switch {
		case verb == "EHLO":
			var ext []string
			if s.tls != nil && !m.tls {
				ext = append(ext, "STARTTLS")
			}
			if s.user != "" {
				ext = append(ext, "AUTH PLAIN")
			}
			say("250-test hello")
			for _, e := range ext {
				say("250-" + e)
			}
			say("250 8BITMIME")
		case verb == "STARTTLS" && s.tls != nil:
			say("220 go ahead")
			tc := tls.Server(c, s.tls)
			if err := tc.Handshake(); err != nil {
				return
			}
			c = tc
			r, w = bufio.NewReader(tc), bufio.NewWriter(tc)
			m.tls = true
		case verb == "AUTH":
			f := strings.Fields(line)
			b, _ := base64.StdEncoding.DecodeString(f[len(f)-1])
			parts := strings.Split(string(b), "\x00")
			if len(f) == 3 && strings.EqualFold(f[1], "PLAIN") && len(parts) == 3 && parts[1] == s.user && parts[2] == s.pass {
				m.authed = parts[1]
				say("235 ok")
			} else {
				m.authFailed = true
				say("535 authentication failed")
			}
		case verb == "MAIL":
			if s.user != "" && m.authed == "" {
				say("530 authentication required")
				continue
			}
			m.from = strings.TrimPrefix(line, "MAIL FROM:")
			say("250 ok")
		case verb == "RCPT":
			m.to = append(m.to, strings.TrimPrefix(line, "RCPT TO:"))
			say("250 ok")
		case verb == "DATA":
			say("354 end with .")
			var data strings.Builder
			for {
				l, err := r.ReadString('\n')
				if err != nil {
					return
				}
				if l == ".\r\n" {
					break
				}
				data.WriteString(strings.TrimPrefix(l, "."))
			}
			m.data = data.String()
			s.mu.Lock()
			s.msgs = append(s.msgs, m)
			s.mu.Unlock()
			say("250 queued")
		case verb == "QUIT":
			say("221 bye")
			return
		case verb == "RSET" || verb == "NOOP":
			say("250 ok")
		default:
			say("502 not implemented")
		}
	}
}

func (s *smtpServer) messages() []smtpMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]smtpMessage(nil), s.msgs...)
}

// selfSigned returns a server certificate for 127.0.0.1 and a client
// configuration that trusts it.
func selfSigned(t *testing.T) (server, client *tls.Config) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "smtp test"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}},
		&tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
}

// TestEmailDelivery sends the firing and resolved notifications of an
// alert through a server that offers STARTTLS and requires AUTH, and
// checks the session and the message.
func TestEmailDelivery(t *testing.T) {
	srvTLS, cliTLS := selfSigned(t)
	const pass = "s3cret-smtp-pass"
	srv := startSMTP(t, srvTLS, "poolfs", pass)
	m := &Email{Addr: srv.ln.Addr().String(), From: "poolfs@example.org", To: []string{"ops@example.org", "oncall@example.org"},
		Username: "poolfs", Password: pass, TLS: cliTLS, RequireTLS: true}
	e, err := NewEngine(Options{Cluster: "lab", Delivery: fastPolicy(2), Notifiers: []Notifier{m}})
	if err != nil {
		t.Fatal(err)
	}
	run(t, e)
	st := healthy(t0)
	st.Pools[0].LostStripes, st.Pools[0].LostFiles = 2, 1
	mustEval(t, e, st)
	mustEval(t, e, healthy(t0.Add(time.Minute)))
	waitFor(t, func() bool { return len(srv.messages()) == 2 })
	msgs := srv.messages()
	for i, want := range []string{"FIRING", "RESOLVED"} {
		g := msgs[i]
		if !g.tls || g.authed != "poolfs" || !strings.HasPrefix(g.from, "<poolfs@example.org>") || strings.Join(g.to, ",") != "<ops@example.org>,<oncall@example.org>" {
			t.Fatalf("message %d session: %+v", i, g)
		}
		subject := "Subject: [poolfs lab] " + want + " critical: data.loss pool default\r\n"
		if !strings.Contains(g.data, subject) || !strings.Contains(g.data, "DATA LOSS in pool default: 2 stripes of 1 files") ||
			!strings.Contains(g.data, "poolfs alerts ack 1") || !strings.Contains(g.data, "\r\nTo: ops@example.org, oncall@example.org\r\n") {
			t.Fatalf("message %d:\n%s\nwant %q and the alert's text", i, g.data, subject)
		}
		if strings.Contains(g.data, pass) {
			t.Fatal("the password is in the message")
		}
	}
	if !strings.Contains(msgs[1].data, "resolved: 2026-11-25T12:01:00Z") {
		t.Fatalf("resolved message without its time:\n%s", msgs[1].data)
	}
}

// TestEmailRefusals checks that a server without STARTTLS is refused
// when TLS is required, that a wrong password is an error that does not
// show it, and that the message text cannot add a header.
func TestEmailRefusals(t *testing.T) {
	plain := startSMTP(t, nil, "", "")
	m := &Email{Addr: plain.ln.Addr().String(), From: "a@example.org", To: []string{"b@example.org"}, RequireTLS: true}
	n := Notification{Event: EventFiring, Alert: Alert{ID: "1", Rule: "r", Subject: "s\r\nBcc: evil@example.org", Severity: Warning,
		Message: "line\r\n.\r\nQUIT"}}
	ctx := context.Background()
	if err := m.Notify(ctx, n); err == nil || !strings.Contains(err.Error(), "STARTTLS") {
		t.Fatalf("no STARTTLS with require_tls: %v", err)
	}
	m.RequireTLS = false
	if err := m.Notify(ctx, n); err != nil {
		t.Fatal(err)
	}
	got := plain.messages()
	if len(got) != 1 || strings.Contains(got[0].data, "\r\nBcc:") || !strings.Contains(got[0].data, "line  .  QUIT") {
		t.Fatalf("messages %+v: want the alert's text on one line, no header added", got)
	}
	srvTLS, cliTLS := selfSigned(t)
	authed := startSMTP(t, srvTLS, "poolfs", "right-password")
	m = &Email{Addr: authed.ln.Addr().String(), From: "a@example.org", To: []string{"b@example.org"}, Username: "poolfs",
		Password: "wrong-password", TLS: cliTLS}
	err := m.Notify(ctx, n)
	if err == nil || strings.Contains(err.Error(), "wrong-password") || !strings.Contains(err.Error(), "AUTH") {
		t.Fatalf("wrong password: %v", err)
	}
	if len(authed.messages()) != 0 {
		t.Fatal("a message went through without authentication")
	}
}
