// Package rpc is poolfs's authenticated, encrypted request/response RPC
// over TCP, used for both control calls (small JSON arguments) and the data
// path (bodies of a few MiB at GB/s), so a small call costs one write and
// a few reads per side, and a body is sealed or opened once on each side,
// in cache-sized records, besides the socket copy.
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
// secret (at least MinSecretLen bytes), in clear:
//
//	server → client  "PFS3" | serverNonce[32]
//	client → server  clientNonce[32] | clientPub[32] |
//	                 HMAC-SHA256(secret, "poolfs rpc v3 client"|serverNonce|clientNonce|clientPub)
//	server → client  auth frame carrying serverPub[32] |
//	                 HMAC-SHA256(secret, "poolfs rpc v3 server"|clientNonce|serverNonce|clientPub|serverPub)
//
// clientPub and serverPub are X25519 public keys made for this connection
// only; the server makes its key only once the client's MAC is right.
// MACs are compared in constant time. On a wrong client MAC the server sends
// an error frame with code "auth" and closes; Dial returns ErrAuth. The
// client also returns ErrAuth if the server's MAC is wrong. A server at
// MaxConns answers a right MAC with code "busy" instead; the client returns
// ErrUnavailable naming the limit.
//
// Then, already in records (below), the two sides exchange identities
// (package identity: a node certificate signed by the cluster CA, naming
// the node and its role):
//
//	server → client  auth frame: serverCert | Ed25519(serverKey, "poolfs rpc v3 server identity"|transcript)
//	client → server  auth frame: clientCert | Ed25519(clientKey, "poolfs rpc v3 client identity"|transcript)
//	server → client  empty auth frame (accepted), or error frame "auth" with the reason, then close
//
// where transcript = serverNonce | clientNonce | clientPub | serverPub. A
// side without an Identity sends empty args. Identity options hold an
// identity.Current, which renewal may replace: each handshake presents
// the one held then, and a client does not reuse a connection made with
// an older one. A side with Peers (an
// identity.Trust) requires the other's certificate and checks that the
// cluster CA signed it, that it is unexpired, of an accepted role
// (ClientOptions.Peers.Roles: which roles may serve this client) and not
// revoked, and that the signature over this connection's transcript is by
// the key it names: a certificate copied off another connection proves
// nothing. Any failure is ErrAuth with the reason (Dial fails; a server
// logs it and closes); a client's refusal of a revoked or expired server
// also wraps ErrUnavailable, as the server is out of the cluster and
// callers go around it. A connection outlives its handshake, so a side
// with Peers checks the other's certificate again (expiry and
// revocation) before every call and, every RecheckEvery (default 1 s),
// on its open connections, closing those of peers revoked or expired
// since (recheck.go): a revocation cuts every connection of the node
// within RecheckEvery of Trust.Revoked reporting it, calls in flight
// included. A side without Peers ignores what it is shown, and
// handlers then see no peer: PeerFrom returns the verified certificate of
// a handler's caller. ServerOptions.Authorize decides, before each
// handler runs, whether that certificate may call the method; a refusal
// is ErrForbidden.
//
// The fourth byte is the protocol version. A client of this version facing
// an older server fails with ErrProtocol naming both versions; an older
// (version 2) client facing this server fails the same way at its first
// check, before sending anything, and a version 2 hello could not pass
// anyway: the MAC labels differ.
//
// # Admission
//
// Until a client has proved the secret its connection costs the server a
// goroutine, a socket and fixed arrays, no buffer: the hello is read
// straight from the socket, and the first bytes a client may send are its
// 96-byte hello. The handshake must end within
// ServerOptions.HandshakeTimeout (default 5 s). At most MaxPending
// connections (default 1024) may be in the handshake; when another arrives
// the oldest is closed, so a flood of connections that stall cannot keep a
// real client, which answers in one round trip, from getting in.
// Authenticated connections are bounded by MaxConns (default 8192).
// Server.Stats counts them and the evictions and refusals. A client whose
// connection the server closes during the handshake (evicted, or past
// the timeout on a starved machine) opens another, up to three per dial:
// no request went out on it. A refusal, a refused connection or a
// timeout is not tried again.
//
// # Records: what is protected
//
// Every byte after the handshake travels in records sealed with AES-256-GCM.
// Each direction has its own key, derived with HKDF-SHA256 from the secret
// and the X25519 shared secret of the two ephemeral keys, salted with both
// nonces ("poolfs rpc v3 client to server", "... server to client"), so
// every connection and direction has fresh keys. A record's nonce is its
// sequence number in its direction. A record holds at most
// 65520 bytes of plaintext plus a 16-byte tag (64 KiB on the wire); a frame
// is one record holding its header, then its name and args cut into
// records, then its body cut into records (empty sections have none). The
// receiver knows every record's length from the header record, which it
// opens before reading or allocating anything else.
//
// So, against anyone on the path who lacks the secret:
//   - Contents (methods, args, bodies, error messages) are confidential.
//   - A record altered, replayed (from this connection or another),
//     reordered, dropped, or injected fails to open: the receiver closes the
//     connection, nothing of that frame reaches a handler or a caller, and
//     the error wraps ErrTampered and ErrProtocol. The server logs it; the
//     client's call fails with ErrUnavailable, wrapping ErrTampered if it
//     was the response that was tampered with (if it was the request, the
//     client only sees the connection close). A stream cut short is an
//     unexpected EOF. Either way the call fails as on a broken connection:
//     a handler never runs on altered bytes, and a caller never gets them.
//   - Connections cannot be hijacked after the handshake.
//   - Forward secrecy: the ephemeral private keys are never stored or sent
//     and are dropped after the handshake, so someone who records traffic
//     and obtains the cluster secret later still cannot read it. (Go does
//     not wipe freed memory, and a connection's record keys live as long as
//     it does: reading a running node's memory is another matter.)
//
// Where both sides trust the cluster CA (Identity and Peers set on both),
// also against anyone who holds the secret:
//   - Neither side can be impersonated without the private key of a
//     certificate the CA signed for an accepted role, unexpired and not
//     revoked; a man in the middle with the secret is refused by both
//     sides, as it cannot sign either transcript.
//   - The certificates travel sealed: node names are not shown on the wire.
//
// What it does not protect:
//   - A leaked secret, where a side sets no Peers: whoever holds the
//     secret can impersonate any server or client that side talks to,
//     and so read and alter the traffic of the connections it sets itself
//     in the middle of from then on (not those recorded before).
//   - A leaked node key: it is that node until its certificate expires or
//     is revoked (identity.Trust.Revoked), and for up to RecheckEvery
//     after on connections it holds.
//   - Authorisation is per method and certificate, by ServerOptions.Authorize;
//     without it any admitted client may call any method.
//   - Traffic analysis: frame timing and sizes (to within a record) show.
//   - Availability: anyone on the path can drop or reset connections (calls
//     fail with ErrUnavailable), and anyone who can reach the port can keep
//     the pending table full (MaxPending), which a real client then has to
//     outrun by one round trip.
//   - The handshake verdict is in clear: a forged "auth" or "busy" verdict
//     makes a Dial fail, it cannot make one succeed.
//
// # Frames
//
// A frame's header is a fixed 26-byte big-endian record followed by two
// sections:
//
//	magic u16 = 0x5046 | type u8 | flags u8 (0) | request id u64 |
//	name length u16 | args length u32 | body length u64
//	name (method, or error code) + args (JSON; error message text) | body (raw)
//
// Types are request, response, error and (handshake only) auth. A response
// or error echoes the request id. Lengths are checked before anything is
// allocated: name <= 128 bytes, args <= 16 MiB, body <= MaxBody (default
// DefaultMaxBody, 256 MiB; set the same on servers and clients). A frame
// over the limits or otherwise malformed is a protocol error: the reader
// closes the connection (the client also returns ErrProtocol). Args buffers
// grow only as records arrive; body buffers are sized from the header,
// which is bounded by MaxBody and authenticated.
//
// A body is sealed from the caller's slice into a pooled buffer of up to
// 256 KiB, written each time it fills, and opened record by record from a
// pooled 64 KiB buffer (still in the CPU cache) into the destination: each
// side reads or writes the body once besides the socket copy.
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
//     enough, else into a fresh slice; the caller owns the result. If the
//     call fails, dst may hold part of the body.
//
// # Cancellation
//
// A handler's context is cancelled when its connection closes or the Server
// is closed; Close waits for handlers to return. A client call honours its
// context: cancellation or deadline mid-call breaks the connection (it is
// closed, not pooled) and the call returns ctx.Err(), wrapped. Client
// deadlines are not sent to the server.
package rpc
