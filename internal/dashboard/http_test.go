package dashboard

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

const (
	adminPW  = "correct horse battery"
	viewerPW = "staple of the viewer"
)

// syncBuffer is a log sink the test reads while the server writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type fixture struct {
	srv   *Server
	ts    *httptest.Server
	fake  *fakeCluster
	users *Users
	log   *syncBuffer
	clock *fakeClock
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newFixture(t *testing.T, useTLS bool) *fixture {
	t.Helper()
	users, err := OpenUsers(filepath.Join(t.TempDir(), UsersFile), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	if err := users.Add("admin", RoleAdmin, adminPW); err != nil {
		t.Fatal(err)
	}
	if err := users.Add("viewer", RoleReadOnly, viewerPW); err != nil {
		t.Fatal(err)
	}
	f := &fixture{fake: &fakeCluster{}, users: users, log: &syncBuffer{}, clock: &fakeClock{t: time.Now()}}
	f.srv, err = New(Config{Cluster: f.fake, Users: users, Now: f.clock.Now,
		Logger: slog.New(slog.NewTextHandler(f.log, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	if useTLS {
		f.ts = httptest.NewTLSServer(f.srv)
	} else {
		f.ts = httptest.NewServer(f.srv)
	}
	t.Cleanup(f.ts.Close)
	return f
}

// client returns a browser-like client: a cookie jar, no redirects
// followed (the tests look at them).
func (f *fixture) client(t *testing.T) *http.Client {
	jar, _ := cookiejar.New(nil)
	c := f.ts.Client()
	c.Jar = jar
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return c
}

var hiddenField = regexp.MustCompile(`name="(token|csrf)" value="([^"]*)"`)

func field(t *testing.T, body, name string) string {
	t.Helper()
	for _, m := range hiddenField.FindAllStringSubmatch(body, -1) {
		if m[1] == name {
			return m[2]
		}
	}
	t.Fatalf("no %s field in page:\n%s", name, body)
	return ""
}

func get(t *testing.T, c *http.Client, u string) (*http.Response, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func post(t *testing.T, c *http.Client, u string, form url.Values) (*http.Response, string) {
	t.Helper()
	resp, err := c.PostForm(u, form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// login logs c in and returns the login response.
func (f *fixture) login(t *testing.T, c *http.Client, user, pw string) (*http.Response, string) {
	t.Helper()
	_, page := get(t, c, f.ts.URL+"/login")
	return post(t, c, f.ts.URL+"/login", url.Values{"user": {user}, "password": {pw}, "token": {field(t, page, "token")}})
}

func TestNoSessionRedirectsToLogin(t *testing.T) {
	f := newFixture(t, false)
	c := f.client(t)
	for _, p := range []string{"/", "/charts", "/events", "/analytics", "/alerts", "/confirm?action=fail-drive&drive=d01"} {
		resp, _ := get(t, c, f.ts.URL+p)
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
			t.Errorf("GET %s without a session: %d to %q, want 303 to /login", p, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	resp, _ := post(t, c, f.ts.URL+"/action", url.Values{"action": {"fail-drive"}, "drive": {"d01"}, "confirm": {"yes"}})
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("POST /action without a session: %d, want 403", resp.StatusCode)
	}
	if calls := f.fake.Calls(); len(calls) != 0 {
		t.Errorf("the cluster was asked %v", calls)
	}
}

func TestCookieFlags(t *testing.T) {
	for _, useTLS := range []bool{false, true} {
		t.Run(map[bool]string{false: "http", true: "https"}[useTLS], func(t *testing.T) {
			f := newFixture(t, useTLS)
			c := f.client(t)
			resp, _ := f.login(t, c, "admin", adminPW)
			if resp.StatusCode != http.StatusSeeOther {
				t.Fatalf("login: %d", resp.StatusCode)
			}
			var sc *http.Cookie
			for _, ck := range resp.Cookies() {
				if ck.Name == sessionCookie && ck.Value != "" {
					sc = ck
				}
			}
			if sc == nil {
				t.Fatalf("no session cookie in %v", resp.Header["Set-Cookie"])
			}
			if !sc.HttpOnly || sc.SameSite != http.SameSiteStrictMode || sc.Secure != useTLS || sc.MaxAge <= 0 {
				t.Fatalf("session cookie %+v: want HttpOnly, SameSite=Strict, Secure=%v, an expiry", sc, useTLS)
			}
			// Logout ends the session on the server, not only in the browser.
			_, page := get(t, c, f.ts.URL+"/")
			stolen := sc.Value
			resp, _ = post(t, c, f.ts.URL+"/logout", url.Values{"csrf": {field(t, page, "csrf")}})
			if resp.StatusCode != http.StatusSeeOther {
				t.Fatalf("logout: %d", resp.StatusCode)
			}
			req, _ := http.NewRequest("GET", f.ts.URL+"/", nil)
			req.AddCookie(&http.Cookie{Name: sessionCookie, Value: stolen})
			c2 := f.client(t)
			resp, err := c2.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusSeeOther {
				t.Fatalf("the session cookie still works after logout: %d", resp.StatusCode)
			}
		})
	}
}

func TestSessionExpires(t *testing.T) {
	f := newFixture(t, false)
	c := f.client(t)
	f.login(t, c, "admin", adminPW)
	if resp, _ := get(t, c, f.ts.URL+"/"); resp.StatusCode != http.StatusOK {
		t.Fatalf("logged in: %d", resp.StatusCode)
	}
	f.clock.Advance(61 * time.Minute) // past the idle timeout
	if resp, _ := get(t, c, f.ts.URL+"/"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("an idle session still works: %d", resp.StatusCode)
	}
}

func TestActionNeedsCSRFAndConfirmation(t *testing.T) {
	f := newFixture(t, false)
	c := f.client(t)
	f.login(t, c, "admin", adminPW)
	_, page := get(t, c, f.ts.URL+"/confirm?action=fail-drive&drive=d01")
	tok := field(t, page, "csrf")
	base := url.Values{"action": {"fail-drive"}, "drive": {"d01"}, "confirm": {"yes"}}
	with := func(k, v string) url.Values {
		out := url.Values{}
		for a, b := range base {
			out[a] = b
		}
		if v == "" {
			delete(out, k)
		} else {
			out.Set(k, v)
		}
		return out
	}
	for name, tc := range map[string]struct {
		form url.Values
		want int
	}{
		"no token":        {with("csrf", ""), http.StatusForbidden},
		"wrong token":     {with("csrf", tok[:len(tok)-2]+"xx"), http.StatusForbidden},
		"no confirmation": {with("confirm", ""), http.StatusBadRequest},
	} {
		form := tc.form
		if name == "no confirmation" {
			form.Set("csrf", tok)
		}
		resp, _ := post(t, c, f.ts.URL+"/action", form)
		if resp.StatusCode != tc.want {
			t.Errorf("%s: %d, want %d", name, resp.StatusCode, tc.want)
		}
	}
	if calls := f.fake.Calls(); len(calls) != 0 {
		t.Fatalf("refused actions reached the cluster: %v", calls)
	}
	resp, _ := post(t, c, f.ts.URL+"/action", with("csrf", tok))
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("confirmed action: %d", resp.StatusCode)
	}
	if calls := f.fake.Calls(); len(calls) != 1 || calls[0] != "fail d01" {
		t.Fatalf("cluster calls %v, want [fail d01]", calls)
	}
	if _, page := get(t, c, f.ts.URL+"/"); !strings.Contains(page, "drive d01 failed") {
		t.Fatalf("the overview does not say what the action did")
	}
	// Another session's token is not this session's.
	c2 := f.client(t)
	f.login(t, c2, "admin", adminPW)
	_, page2 := get(t, c2, f.ts.URL+"/")
	if other := field(t, page2, "csrf"); other == tok {
		t.Fatal("two sessions share a CSRF token")
	}
}

func TestReadOnlyCannotAct(t *testing.T) {
	f := newFixture(t, false)
	c := f.client(t)
	f.login(t, c, "viewer", viewerPW)
	resp, page := get(t, c, f.ts.URL+"/")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("overview: %d", resp.StatusCode)
	}
	for _, s := range []string{`id="fail-d01"`, "/confirm", `value="scrub-start"`} {
		if strings.Contains(page, s) {
			t.Errorf("read-only overview shows %s", s)
		}
	}
	if resp, _ := get(t, c, f.ts.URL+"/confirm?action=fail-drive&drive=d01"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("read-only confirm page: %d, want 403", resp.StatusCode)
	}
	resp, _ = post(t, c, f.ts.URL+"/action", url.Values{"action": {"fail-drive"}, "drive": {"d01"}, "confirm": {"yes"},
		"csrf": {field(t, page, "csrf")}})
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("read-only POST /action: %d, want 403", resp.StatusCode)
	}
	if calls := f.fake.Calls(); len(calls) != 0 {
		t.Fatalf("a read-only user's action reached the cluster: %v", calls)
	}
	// Promoted by poolfs user passwd --role admin: its old session ends.
	if err := f.users.SetPassword("viewer", RoleAdmin, viewerPW+"2"); err != nil {
		t.Fatal(err)
	}
	if resp, _ := get(t, c, f.ts.URL+"/"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("a session survived its user's new password: %d", resp.StatusCode)
	}
}

func TestLoginThrottle(t *testing.T) {
	f := newFixture(t, false)
	c := f.client(t)
	for i := range 3 {
		if resp, _ := f.login(t, c, "admin", "wrong password "+string(rune('a'+i))); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("failure %d: %d, want 401", i+1, resp.StatusCode)
		}
	}
	// The fourth failure locks the user out for a second, then two.
	if resp, _ := f.login(t, c, "admin", "wrong again"); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("fourth failure: %d, want 429", resp.StatusCode)
	}
	resp, body := f.login(t, c, "admin", adminPW)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("the right password while locked: %d Retry-After %q, want 429 and 1", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if !strings.Contains(body, "too many failed logins") {
		t.Fatalf("the page does not say why")
	}
	f.clock.Advance(1100 * time.Millisecond)
	if resp, _ := f.login(t, c, "admin", "wrong once more"); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("fifth failure: %d", resp.StatusCode)
	}
	f.clock.Advance(1100 * time.Millisecond)
	if resp, _ := f.login(t, c, "admin", adminPW); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("backoff did not double: %d", resp.StatusCode)
	}
	f.clock.Advance(time.Second)
	if resp, _ := f.login(t, c, "admin", adminPW); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("after the backoff: %d, want 303", resp.StatusCode)
	}
	// The source address is throttled too: guessing other users' names
	// from it is locked out as well (the address's count was not reset by
	// the success).
	if resp, _ := f.login(t, c, "viewer", "nope nope nope"); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("another user from the same address: %d, want 429", resp.StatusCode)
	}
}

func TestLoginFormToken(t *testing.T) {
	f := newFixture(t, false)
	c := f.client(t)
	resp, _ := post(t, c, f.ts.URL+"/login", url.Values{"user": {"admin"}, "password": {adminPW}, "token": {"forged"}})
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("login without the form's token: %d, want 403", resp.StatusCode)
	}
}

func TestNoSecretInPagesOrLogs(t *testing.T) {
	f := newFixture(t, false)
	c := f.client(t)
	var bodies []string
	_, b := f.login(t, c, "admin", "a wrong guess here")
	bodies = append(bodies, b)
	resp, b := f.login(t, c, "admin", adminPW)
	bodies = append(bodies, b)
	var tok string
	for _, ck := range resp.Cookies() {
		if ck.Name == sessionCookie {
			tok = ck.Value
		}
	}
	for _, p := range []string{"/", "/charts", "/events", "/analytics", "/alerts", "/confirm?action=fail-drive&drive=d02"} {
		_, b := get(t, c, f.ts.URL+p)
		bodies = append(bodies, b)
	}
	_, page := get(t, c, f.ts.URL+"/")
	_, b = post(t, c, f.ts.URL+"/action", url.Values{"action": {"fail-drive"}, "drive": {"d02"}, "confirm": {"yes"},
		"csrf": {field(t, page, "csrf")}})
	bodies = append(bodies, b)
	users, _ := f.users.List()
	if len(users) != 2 {
		t.Fatalf("users %v", users)
	}
	_, hash := f.users.current("admin")
	logs := f.log.String()
	if !strings.Contains(logs, "login failed") || !strings.Contains(logs, "dashboard: action") {
		t.Fatalf("the log lacks the login failure or the action:\n%s", logs)
	}
	for _, secret := range []string{adminPW, "a wrong guess here", hash, tok} {
		if strings.Contains(logs, secret) {
			t.Errorf("the log holds a secret (%.6s…)", secret)
		}
		for i, b := range bodies {
			if strings.Contains(b, secret) {
				t.Errorf("page %d holds a secret (%.6s…)", i, secret)
			}
		}
	}
}

func TestAnalyticsNarrowFiles(t *testing.T) {
	f := newFixture(t, false)
	t.Cleanup(f.srv.Close)
	c := f.client(t)
	f.login(t, c, "admin", adminPW)
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, page := get(t, c, f.ts.URL+"/analytics")
		if strings.Contains(page, "/scratch/narrow.dat") && strings.Contains(page, "3 of 6") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the analytics page does not list the narrow file:\n%s", page)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestOverviewFromStatusAndHistory: the overview shows the status (health
// in its colour with the reason, a down drive with its countdown) and the
// trend and time to full from the history of the pool's use.
func TestOverviewFromStatusAndHistory(t *testing.T) {
	f := newFixture(t, false)
	now := f.clock.Now()
	for i := range 600 { // 1 GiB more every hour for the last ten hours
		used := float64(30<<30) + float64(i)*float64(1<<30)/60
		f.srv.hist.Add("pool/default/used", now.Add(time.Duration(i-599)*time.Minute), used)
	}
	c := f.client(t)
	f.login(t, c, "viewer", viewerPW)
	_, page := get(t, c, f.ts.URL+"/")
	for _, want := range []string{
		`class="health orange"`, "drive d05 down: declared failed and rebuilt in 9m0s",
		`id="drive-d05" data-state="down"`, "down: failed in 9m0s unless it answers",
		"<td>24.0 GiB/day</td>", // the trend
		"<td>2.5 days</td>",     // (100 GiB usable - 40 GiB used) at 24 GiB a day
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the overview lacks %q", want)
		}
	}
}
