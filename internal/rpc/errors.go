package rpc

import (
	"context"
	"errors"
	"fmt"
)

// Sentinel errors. Transport failures wrap ErrUnavailable; errors returned by
// a remote handler arrive as *RemoteError, which unwraps to the sentinel
// registered for its code.
var (
	// ErrAuth means the handshake failed: the peers do not share the
	// secret, or a peer's certificate was missing, not signed by the
	// cluster CA, expired, revoked, of a role not accepted, or not
	// proved by a signature over this connection's handshake.
	ErrAuth = errors.New("rpc: authentication failed")
	// ErrProtocol means a peer sent a malformed or over-limit frame, or
	// speaks another protocol version; the connection is closed.
	ErrProtocol = errors.New("rpc: protocol error")
	// ErrTampered means a record failed authentication: it was altered,
	// replayed, reordered, injected or cut short on the way (or a record
	// before it was dropped). It comes wrapped together with ErrProtocol,
	// and a client's call error also wraps ErrUnavailable, as for any
	// connection broken in transit; the connection is closed and nothing
	// of the frame is delivered.
	ErrTampered = errors.New("rpc: frame failed authentication (altered, replayed, reordered or injected in transit)")
	// ErrNoMethod is returned (remotely) for a method nobody registered.
	ErrNoMethod = errors.New("rpc: no such method")
	// ErrInternal is returned (remotely) for handler errors that match no
	// registered sentinel, and for handler panics.
	ErrInternal = errors.New("rpc: internal server error")
	// ErrUnavailable is wrapped by every transport error (connection refused,
	// reset, closed mid-call): the server is down or unreachable. Whether the
	// server executed the call is unknown.
	ErrUnavailable = errors.New("rpc: server unavailable")
	// ErrClosed is returned by calls on a closed Client.
	ErrClosed = errors.New("rpc: client closed")
	// ErrForbidden is returned (remotely) for a call the server's
	// ServerOptions.Authorize refused to the caller's certificate.
	ErrForbidden = errors.New("rpc: forbidden")
)

// Built-in error codes, present in every ErrorTable.
const (
	codeInternal = "internal"
	codeNoMethod = "nomethod"
	codeAuth     = "auth"
	codeForbid   = "forbidden"
	codeBusy     = "busy" // handshake verdict only: server at MaxConns
	codeCanceled = "canceled"
	codeDeadline = "deadline"
)

type errorEntry struct {
	code string
	err  error
}

// ErrorTable maps wire error codes to sentinel errors, in both directions.
// Service packages build one and pass it to both Server and Client. A table
// must not be modified after it has been passed to a Server or Client; reads
// are then safe from any goroutine. A nil *ErrorTable holds only the
// built-in codes.
type ErrorTable struct {
	entries []errorEntry // in registration order; first errors.Is match wins
	byCode  map[string]error
}

// NewErrorTable returns a table holding the built-in codes plus the given
// (code string, sentinel error) pairs. It panics on malformed pairs, like
// Register.
func NewErrorTable(pairs ...any) *ErrorTable {
	if len(pairs)%2 != 0 {
		panic("rpc: NewErrorTable needs (code, error) pairs")
	}
	t := &ErrorTable{byCode: make(map[string]error)}
	for i := 0; i < len(pairs); i += 2 {
		code, ok1 := pairs[i].(string)
		err, ok2 := pairs[i+1].(error)
		if !ok1 || !ok2 {
			panic(fmt.Sprintf("rpc: NewErrorTable pair %d is (%T, %T), want (string, error)", i/2, pairs[i], pairs[i+1]))
		}
		t.Register(code, err)
	}
	return t
}

// Register maps code to err. It panics if code is empty, longer than 128
// bytes, already registered or built in, or if err is nil: these are
// programming errors found at start-up.
func (t *ErrorTable) Register(code string, err error) {
	switch {
	case code == "" || len(code) > maxMethodLen:
		panic(fmt.Sprintf("rpc: bad error code %q", code))
	case err == nil:
		panic(fmt.Sprintf("rpc: nil error for code %q", code))
	case builtinError(code) != nil:
		panic(fmt.Sprintf("rpc: error code %q is built in", code))
	}
	if t.byCode == nil {
		t.byCode = make(map[string]error)
	}
	if _, dup := t.byCode[code]; dup {
		panic(fmt.Sprintf("rpc: error code %q registered twice", code))
	}
	t.byCode[code] = err
	t.entries = append(t.entries, errorEntry{code, err})
}

func builtinError(code string) error {
	switch code {
	case codeInternal:
		return ErrInternal
	case codeNoMethod:
		return ErrNoMethod
	case codeAuth:
		return ErrAuth
	case codeForbid:
		return ErrForbidden
	case codeCanceled:
		return context.Canceled
	case codeDeadline:
		return context.DeadlineExceeded
	}
	return nil
}

// encode returns the wire code for err: the first registered sentinel that
// errors.Is matches, then the built-ins, then the code of a forwarded
// *RemoteError, else "internal".
func (t *ErrorTable) encode(err error) string {
	if t != nil {
		for _, e := range t.entries {
			if errors.Is(err, e.err) {
				return e.code
			}
		}
	}
	for _, code := range [...]string{codeNoMethod, codeInternal, codeAuth, codeForbid, codeDeadline, codeCanceled} {
		if errors.Is(err, builtinError(code)) {
			return code
		}
	}
	if re, ok := errors.AsType[*RemoteError](err); ok && re.Code != "" {
		return re.Code
	}
	return codeInternal
}

// decode returns the sentinel for code, or nil if the code is unknown.
func (t *ErrorTable) decode(code string) error {
	if err := builtinError(code); err != nil {
		return err
	}
	if t != nil {
		return t.byCode[code]
	}
	return nil
}

// RemoteError is an error returned by a remote handler. Error returns the
// server's message; Unwrap returns the sentinel the client's ErrorTable
// registers for Code (nil if unknown), so errors.Is(err, meta.ErrNotFound)
// works across the wire.
type RemoteError struct {
	Code string
	Msg  string

	sentinel error
}

func (e *RemoteError) Error() string { return e.Msg }

// Unwrap returns the registered sentinel for e.Code, or nil.
func (e *RemoteError) Unwrap() error { return e.sentinel }
