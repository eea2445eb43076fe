package postgres

import (
	"regexp"
	"strings"
)

// Passwords in connection strings. A password given in a URL or a
// keyword/value string shows in `ps` to every local user, so poolfs takes
// it, as libpq does, from PGPASSWORD, a password file (~/.pgpass,
// PGPASSFILE, passfile=) or a service file (PGSERVICE, PGSERVICEFILE,
// service=) instead, and whatever shows a connection string passes it
// through Redact first.
var (
	// userinfo: scheme://user:PASSWORD@ ; the password ends at the last
	// '@' of the text (a password may hold '@'; masking too much is safe).
	redactUserinfo = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://[^:/@\s]*):.*@`)
	// password=VALUE and sslpassword=VALUE, in a keyword/value string or
	// a URL query: a quoted value, or everything up to white space.
	redactKeyword = regexp.MustCompile(`(?i)(\b(?:ssl)?password\s*=\s*)(?:'(?:[^'\\]|\\.)*'|\S*)`)
)

// Redact returns s, a connection string or any text holding one (an error
// message), with every password in it replaced by xxxxx. It masks more
// than the password rather than less when the text is malformed.
func Redact(s string) string {
	s = redactUserinfo.ReplaceAllString(s, "${1}:xxxxx@")
	return redactKeyword.ReplaceAllString(s, "${1}xxxxx")
}

// HasPassword reports whether the connection string dsn holds a password
// (one that shows in `ps` when dsn is an argument).
func HasPassword(dsn string) bool { return Redact(dsn) != dsn }

// redactedError is err with its message passed through Redact and with
// the password, wherever it came from, masked; errors.Is and errors.As
// still see err.
type redactedError struct {
	err      error
	password string
}

func (e *redactedError) Error() string {
	msg := Redact(e.err.Error())
	if e.password != "" {
		msg = strings.ReplaceAll(msg, e.password, "xxxxx")
	}
	return msg
}

func (e *redactedError) Unwrap() error { return e.err }

// redactErr wraps err so that its message shows no password.
func redactErr(err error, password string) error {
	if err == nil {
		return nil
	}
	return &redactedError{err: err, password: password}
}
