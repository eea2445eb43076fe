package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"poolfs/internal/dashboard"
	"poolfs/internal/dashboard/history"
)

var dashAddr = regexp.MustCompile(`dashboard: (https?://127\.0\.0\.1:\d+)/`)

// waitDashboard returns the dashboard URL `poolfs up` printed.
func waitDashboard(t *testing.T, up *upProc) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if m := dashAddr.FindStringSubmatch(up.out.String()); m != nil {
			return m[1]
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no dashboard address in the output of up:\n%s", up.out.String())
	return ""
}

// dashLogin logs in and returns the overview page's status and body.
func dashLogin(t *testing.T, base, user, pw string) (int, string) {
	t.Helper()
	code, body, _ := dashLoginWith(t, &http.Client{Timeout: 20 * time.Second}, base, user, pw)
	return code, body
}

// dashLoginWith is dashLogin with a client of the caller's; it also
// returns the session cookie the login set.
func dashLoginWith(t *testing.T, c *http.Client, base, user, pw string) (int, string, *http.Cookie) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c.Jar = jar
	var session *http.Cookie
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		for _, ck := range req.Response.Cookies() {
			if ck.Name == "poolfs_session" {
				session = ck
			}
		}
		return nil
	}
	resp, err := c.Get(base + "/login")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	tok := regexp.MustCompile(`name="token" value="([^"]+)"`).FindSubmatch(b)
	if tok == nil {
		t.Fatalf("no login form: %s", b)
	}
	resp, err = c.PostForm(base+"/login", url.Values{"user": {user}, "password": {pw}, "token": {string(tok[1])}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(b), session
}

// TestDashboardUp: `poolfs up` serves the dashboard with the first admin's
// password from a file (never printed), `poolfs user add` reads a new
// user's password from stdin and the running dashboard admits it at once,
// and the history file survives a restart.
func TestDashboardUp(t *testing.T) {
	dir := t.TempDir()
	pwFile := filepath.Join(t.TempDir(), "pw")
	const adminPW = "the first admin's password"
	if err := os.WriteFile(pwFile, []byte(adminPW+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	up := startUp(t, dir, "--drives", "7", "--scheme", "4+2", "--drive-size", "256M", "--dashboard", "127.0.0.1:0",
		"--admin-password-file", pwFile)
	base := waitDashboard(t, up)
	if strings.Contains(up.out.String(), adminPW) || strings.Contains(up.out.String(), "password ") {
		t.Fatalf("up printed a password given in a file:\n%s", up.out.String())
	}
	fi, err := os.Stat(filepath.Join(dir, dashboard.UsersFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("user file: %v %v, want mode 0600", fi, err)
	}
	if code, body := dashLogin(t, base, "admin", adminPW); code != http.StatusOK || !strings.Contains(body, `id="health"`) {
		t.Fatalf("admin login: %d\n%s", code, body)
	}
	if code, _ := dashLogin(t, base, "admin", "not the password"); code != http.StatusUnauthorized {
		t.Fatalf("wrong password: %d, want 401", code)
	}

	add := exec.Command(binary, "user", "add", "-c", dir, "ops", "--role", "read-only")
	add.Stdin = strings.NewReader("ops password 123\n")
	if out, err := add.CombinedOutput(); err != nil {
		t.Fatalf("user add: %v\n%s", err, out)
	}
	code, body := dashLogin(t, base, "ops", "ops password 123")
	if code != http.StatusOK || !strings.Contains(body, "ops (read-only)") || strings.Contains(body, `id="fail-d01"`) {
		t.Fatalf("read-only login: %d\n%s", code, body)
	}
	if out := run(t, "user", "list", "-c", dir); !strings.Contains(out, "admin\tadmin") || !strings.Contains(out, "ops\tread-only") {
		t.Fatalf("user list:\n%s", out)
	}
	run(t, "user", "del", "-c", dir, "ops")
	if code, _ := dashLogin(t, base, "ops", "ops password 123"); code != http.StatusUnauthorized {
		t.Fatalf("removed user: %d, want 401", code)
	}
	if out, err := exec.Command(binary, "user", "del", "-c", dir, "admin").CombinedOutput(); err == nil {
		t.Fatalf("the last admin was removed:\n%s", out)
	}

	time.Sleep(1500 * time.Millisecond) // a few samples of the charts
	up.stop(t)
	hist, err := history.Load(filepath.Join(dir, dashboard.HistoryFile))
	if err != nil {
		t.Fatal(err)
	}
	if names := hist.Names(); len(names) == 0 || !strings.Contains(strings.Join(names, " "), "pool/default/write_bytes") {
		t.Fatalf("history after a restart: %v", names)
	}
	fi, err = os.Stat(filepath.Join(dir, dashboard.HistoryFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("history file: %v %v, want mode 0600", fi, err)
	}
}

// TestDashboardFirstAdminGenerated: without a password file the first
// start generates the admin's password. Its output is not a terminal (as a
// service's journal is not), so the password goes to an owner-only file
// in the cluster directory and the output names the file, never the
// password; it logs in; `user passwd admin` removes the file; a later
// start makes no password.
func TestDashboardFirstAdminGenerated(t *testing.T) {
	dir := t.TempDir()
	up := startUp(t, dir, "--drives", "7", "--scheme", "4+2", "--drive-size", "256M", "--dashboard", "127.0.0.1:0")
	base := waitDashboard(t, up)
	pwPath := filepath.Join(dir, FirstPasswordFile)
	if !strings.Contains(up.out.String(), "password in "+pwPath) {
		t.Fatalf("the output does not name the password file %s:\n%s", pwPath, up.out.String())
	}
	fi, err := os.Stat(pwPath)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("password file: %v %v, want mode 0600", fi, err)
	}
	b, err := os.ReadFile(pwPath)
	pw := strings.TrimSpace(string(b))
	if err != nil || len(pw) < 12 {
		t.Fatalf("password file holds %q: %v", b, err)
	}
	if strings.Contains(up.out.String(), pw) {
		t.Fatalf("the generated password is in the output:\n%s", up.out.String())
	}
	if code, _ := dashLogin(t, base, "admin", pw); code != http.StatusOK {
		t.Fatalf("login with the generated password: %d", code)
	}
	passwd := exec.Command(binary, "user", "passwd", "-c", dir, "admin")
	passwd.Stdin = strings.NewReader("a new admin password\n")
	if out, err := passwd.CombinedOutput(); err != nil {
		t.Fatalf("user passwd admin: %v\n%s", err, out)
	}
	if _, err := os.Stat(pwPath); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("password file after passwd: %v, want removed", err)
	}
	if code, _ := dashLogin(t, base, "admin", "a new admin password"); code != http.StatusOK {
		t.Fatalf("login with the changed password: %d", code)
	}
	up.stop(t)
	up = startUp(t, dir, "--dashboard", "127.0.0.1:0")
	waitDashboard(t, up)
	if strings.Contains(up.out.String(), "password") {
		t.Fatalf("a later start spoke of a password:\n%s", up.out.String())
	}
	if _, err := os.Stat(pwPath); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a later start wrote a password file: %v", err)
	}
	up.stop(t)
}

func TestDashboardRefusesClearTextOnTheNetwork(t *testing.T) {
	out, err := exec.Command(binary, "up", "-c", t.TempDir(), "--listen", "127.0.0.1:0", "--dashboard", "0.0.0.0:0").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "not a loopback address") {
		t.Fatalf("up --dashboard 0.0.0.0:0 without a certificate: %v\n%s", err, out)
	}
}

// TestDashboardHTTPS: with a certificate the dashboard serves HTTPS only,
// on any address, and its session cookie is Secure.
func TestDashboardHTTPS(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "poolfs dashboard test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	certFile, keyFile, pwFile := filepath.Join(tmp, "cert.pem"), filepath.Join(tmp, "key.pem"), filepath.Join(tmp, "pw")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	os.WriteFile(pwFile, []byte("a password over TLS\n"), 0o600)
	dir := t.TempDir()
	up := startUp(t, dir, "--drives", "7", "--scheme", "4+2", "--drive-size", "256M", "--dashboard", "127.0.0.1:0",
		"--dashboard-cert", certFile, "--dashboard-key", keyFile, "--admin-password-file", pwFile)
	base := waitDashboard(t, up)
	if !strings.HasPrefix(base, "https://") {
		t.Fatalf("dashboard at %s, want https", base)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(cert)
	c := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	code, body, session := dashLoginWith(t, c, base, "admin", "a password over TLS")
	if code != http.StatusOK || !strings.Contains(body, `id="health"`) {
		t.Fatalf("login over HTTPS: %d", code)
	}
	if session == nil || !session.Secure || !session.HttpOnly || session.SameSite != http.SameSiteStrictMode {
		t.Fatalf("session cookie over HTTPS: %+v, want Secure, HttpOnly, SameSite=Strict", session)
	}
	if resp, err := http.Get("http://" + strings.TrimPrefix(base, "https://") + "/login"); err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(b), "login-form") {
			t.Fatal("the HTTPS dashboard answered in clear text")
		}
	}
	up.stop(t)
}
