package dashboard

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"sync"
	"time"
)

// session is a logged-in user. The cookie holds Token; the server keeps
// only its SHA-256, so a dump of the table logs nobody in.
type session struct {
	user    string
	role    Role
	hash    string // the user's password hash at login: a new password ends the session
	csrf    string // the token every form of this session carries
	expires time.Time
	idle    time.Time // expires earlier if not used
	flash   string    // a message for the next page (the result of an action)
}

// sessions is the table of live sessions, in memory only: a restart logs
// everyone out.
type sessions struct {
	ttl, idle time.Duration
	mu        struct {
		sync.Mutex
		byHash map[[32]byte]*session
	}
}

func newSessions(ttl, idle time.Duration) *sessions {
	s := &sessions{ttl: ttl, idle: idle}
	s.mu.byHash = map[[32]byte]*session{}
	return s
}

func randomToken() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// create starts a session and returns its token (for the cookie).
func (s *sessions) create(user string, role Role, hash string, now time.Time) (string, *session) {
	tok := randomToken()
	ss := &session{user: user, role: role, hash: hash, csrf: randomToken(), expires: now.Add(s.ttl), idle: now.Add(s.idle)}
	s.mu.Lock()
	defer s.mu.Unlock()
	for h, x := range s.mu.byHash {
		if now.After(x.expires) || now.After(x.idle) {
			delete(s.mu.byHash, h)
		}
	}
	s.mu.byHash[sha256.Sum256([]byte(tok))] = ss
	return tok, ss
}

// get returns the live session of token and extends its idle deadline;
// nil if there is none or it expired.
func (s *sessions) get(tok string, now time.Time) *session {
	if tok == "" {
		return nil
	}
	h := sha256.Sum256([]byte(tok))
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.mu.byHash[h]
	if ss == nil {
		return nil
	}
	if now.After(ss.expires) || now.After(ss.idle) {
		delete(s.mu.byHash, h)
		return nil
	}
	ss.idle = now.Add(s.idle)
	c := *ss
	return &c
}

// drop ends the session of token.
func (s *sessions) drop(tok string) {
	h := sha256.Sum256([]byte(tok))
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.mu.byHash, h)
}

// sameToken compares two tokens in constant time.
func sameToken(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// setFlash keeps a message for the session's next page.
func (s *sessions) setFlash(tok, msg string) {
	h := sha256.Sum256([]byte(tok))
	s.mu.Lock()
	defer s.mu.Unlock()
	if ss := s.mu.byHash[h]; ss != nil {
		ss.flash = msg
	}
}

// takeFlash returns and clears the session's message.
func (s *sessions) takeFlash(tok string) string {
	h := sha256.Sum256([]byte(tok))
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.mu.byHash[h]
	if ss == nil {
		return ""
	}
	m := ss.flash
	ss.flash = ""
	return m
}
