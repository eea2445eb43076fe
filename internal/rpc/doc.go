// Package rpc is poolfs's authenticated request/response RPC over TCP, used
// for both control calls (small JSON arguments) and the data path (bodies of
// a few MiB at GB/s), so a call costs one write (or writev) and a few reads
// per side and a body is copied once, socket to buffer, on each side.
//
// # Model
//
// A Server registers HandlerFuncs by method name ("meta.Lookup") and serves
// them on any number of listeners. A Client talks to one address through a
// pool of connections; each connection carries exactly one outstanding call,
// so concurrency equals the number of goroutines calling (up to
// ClientOptions.MaxConns connections, default 64; more callers wait).
// Calls are never retried: a transport failure wraps ErrUnavailable and the
// caller cannot know whether the server executed the call.
//
// # Handshake
//
// Every connection starts with mutual challenge-response over the cluster
// secret (at least MinSecretLen bytes), within 10 seconds:
//
//	server → client  "PFS1" | serverNonce[32]
//	client → server  clientNonce[32] | HMAC-SHA256(secret, "client"|serverNonce|clientNonce)
//	server → client  auth frame carrying HMAC-SHA256(secret, "server"|clientNonce|serverNonce)
//
// MACs are compared in constant time. On a wrong client MAC the server sends
// an error frame with code "auth" and closes; Dial returns ErrAuth. The
// client also returns ErrAuth if the server's MAC is wrong.
//
// Known limitation: after the handshake, frames are neither encrypted nor
// individually authenticated. The handshake proves who opened the
// connection, but anyone on the path can read or tamper with the traffic.
// poolfs assumes a trusted cluster network; TLS is the planned remedy.
//
// # Frames
//
// A frame is a fixed 26-byte big-endian header followed by three sections:
//
//	magic u16 = 0x5046 | type u8 | flags u8 (0) | request id u64 |
//	name length u16 | args length u32 | body length u64
//	name (method, or error code) | args (JSON; error message text) | body (raw)
//
// Types are request, response, error and (handshake only) auth. A response
// or error echoes the request id. Lengths are checked before anything is
// allocated: name <= 128 bytes, args <= 16 MiB, body <= MaxBody (default
// DefaultMaxBody, 256 MiB; set the same on servers and clients). A frame
// over the limits or otherwise malformed is a protocol error: the reader
// closes the connection (the client also returns ErrProtocol). Args buffers
// grow only as data arrives; body buffers are sized from the header, which
// is bounded by MaxBody and only accepted after authentication.
//
// # Errors
//
// A handler error travels as a code and its message. The server's
// ErrorTable picks the code of the first registered sentinel that the error
// matches with errors.Is (then the built-ins: "nomethod", "internal",
// "deadline", "canceled"); the client's ErrorTable turns the code back into
// the sentinel, which *RemoteError unwraps to. Handler panics are recovered,
// logged and reported as ErrInternal. Unknown methods report ErrNoMethod.
//
// # Buffer ownership
//
//   - Request.Method, Args and Body are valid only while the handler runs.
//     Body is taken from a size-classed sync.Pool and reused as soon as the
//     handler returns, unless the handler calls Request.DetachBody.
//   - Response.Body is written after the handler returns; the server calls
//     Response.Done (if set) once it no longer needs it.
//   - The body passed to Call and CallBody is only read during the call.
//   - CallBody reads the response body into dst when cap(dst) is large
//     enough, else into a fresh slice; the caller owns the result.
//
// # Cancellation
//
// A handler's context is cancelled when its connection closes or the Server
// is closed; Close waits for handlers to return. A client call honours its
// context: cancellation or deadline mid-call breaks the connection (it is
// closed, not pooled) and the call returns ctx.Err(), wrapped. Client
// deadlines are not sent to the server.
package rpc
