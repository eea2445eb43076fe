package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// Cookie names: the session, and the login form's anti-forgery token.
const (
	sessionCookie = "poolfs_session"
	loginCookie   = "poolfs_login"
)

type ctxKey struct{}

// userOf returns the session of an authenticated request (nil if none).
func userOf(r *http.Request) *session {
	s, _ := r.Context().Value(ctxKey{}).(*session)
	return s
}

// setCookie sets a cookie HttpOnly, SameSite=Strict, and Secure when the
// request came over TLS.
func setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: "/", MaxAge: maxAge, HttpOnly: true,
		Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
}

// authed admits requests of a live session. Without one a page (GET)
// redirects to the login form and anything else is refused with 403.
func (s *Server) authed(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var ss *session
		if c, err := r.Cookie(sessionCookie); err == nil {
			ss = s.sess.get(c.Value, s.cfg.Now())
		}
		if ss != nil {
			// The role is the user file's now: a user removed, demoted or
			// given a new password by `poolfs user` loses the session's
			// rights at its next request.
			role, hash := s.cfg.Users.current(ss.user)
			if role == "" || hash != ss.hash {
				ss = nil
			} else {
				ss.role = role
			}
		}
		if ss == nil {
			if r.Method == http.MethodGet || r.Method == http.MethodHead {
				http.Redirect(w, r, "/login", http.StatusSeeOther)
				return
			}
			s.fail(w, r, http.StatusForbidden, "not logged in")
			return
		}
		h(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, ss)))
	}
}

// adminOnly refuses users without the admin role (403).
func (s *Server) adminOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if u := userOf(r); u == nil || u.role != RoleAdmin {
			s.log.Warn("dashboard: action refused: not an admin", "user", u.user, "path", r.URL.Path)
			s.fail(w, r, http.StatusForbidden, "this needs the admin role")
			return
		}
		h(w, r)
	}
}

// checkCSRF reports whether a form carries its session's token.
func checkCSRF(r *http.Request) bool {
	u := userOf(r)
	return u != nil && sameToken(r.PostFormValue("csrf"), u.csrf)
}

type loginView struct {
	Token string
	Name  string
}

func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	tok := randomToken()
	setCookie(w, r, loginCookie, tok, 3600)
	s.render(w, r, http.StatusOK, "login.html", view{Title: "Log in", Data: loginView{Token: tok}})
}

// clientAddr is the source address of the request, without its port.
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	name, password := r.PostFormValue("user"), r.PostFormValue("password")
	c, err := r.Cookie(loginCookie)
	if err != nil || !sameToken(r.PostFormValue("token"), c.Value) {
		s.fail(w, r, http.StatusForbidden, "the login form expired or was not sent by this site: reload it")
		return
	}
	now, addr := s.cfg.Now(), clientAddr(r)
	keys := []string{"user:" + name, "addr:" + addr}
	retry := func(wait time.Duration) {
		secs := int(wait.Seconds() + 0.999)
		w.Header().Set("Retry-After", fmt.Sprint(secs))
		tok := randomToken()
		setCookie(w, r, loginCookie, tok, 3600)
		s.render(w, r, http.StatusTooManyRequests, "login.html", view{Title: "Log in",
			Error: fmt.Sprintf("too many failed logins: try again in %d s", secs), Data: loginView{Token: tok, Name: name}})
	}
	if wait := s.cfg.Throttle.Wait(now, keys...); wait > 0 {
		s.log.Warn("dashboard: login refused while throttled", "user", name, "addr", addr)
		retry(wait)
		return
	}
	role, hash, err := s.cfg.Users.verify(name, password)
	if err != nil {
		s.cfg.Throttle.Fail(now, keys...)
		s.log.Warn("dashboard: login failed", "user", name, "addr", addr)
		if !errors.Is(err, ErrBadLogin) {
			s.log.Error("dashboard: user file", "err", err)
		}
		if wait := s.cfg.Throttle.Wait(now, keys...); wait > 0 {
			retry(wait)
			return
		}
		tok := randomToken()
		setCookie(w, r, loginCookie, tok, 3600)
		s.render(w, r, http.StatusUnauthorized, "login.html", view{Title: "Log in", Error: "wrong user name or password",
			Data: loginView{Token: tok, Name: name}})
		return
	}
	s.cfg.Throttle.Succeed("user:" + name)
	tok, _ := s.sess.create(name, role, hash, now)
	setCookie(w, r, sessionCookie, tok, int(s.cfg.SessionTTL.Seconds()))
	setCookie(w, r, loginCookie, "", -1)
	s.log.Info("dashboard: login", "user", name, "role", string(role), "addr", addr)
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	if !checkCSRF(r) {
		s.fail(w, r, http.StatusForbidden, "CSRF token missing or wrong")
		return
	}
	if c, err := r.Cookie(sessionCookie); err == nil {
		s.sess.drop(c.Value)
	}
	setCookie(w, r, sessionCookie, "", -1)
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}
