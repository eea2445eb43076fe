// Package dashboard is the web dashboard of a poolfs cluster: health at a
// glance, capacity with its trend and time to full, the drive map, live
// charts, recovery and scrub progress, the event log, analytics, alerts,
// and the administrative actions, served by net/http from templates and
// assets embedded in the binary (no CDN, nothing else to install). Charts
// are SVG drawn by the server; a small script refreshes the live part.
//
// Everything it shows and does goes through Cluster, the management
// service's calls that the CLI makes (*mgmt.Client), so a button does what
// its command does. Per-client statistics and alerts come from optional
// sources (ClientStats, Alerts).
//
// Security, the invariants:
//   - every page but the login form needs a session; a request without one
//     is redirected to the login form (GET) or refused with 403;
//   - users and roles live in the user file (Users: bcrypt hashes, mode
//     0600); there is no default password; a user's role is read from the
//     file at each request, so removing or demoting a user takes effect at
//     once;
//   - actions (POST /action) need the admin role, the session's CSRF token
//     and the confirmation field that only the confirmation page sends; a
//     read-only user is refused with 403 and never shown the buttons;
//   - the session cookie is HttpOnly, SameSite=Strict, Secure when served
//     over TLS, and expires (SessionTTL, IdleTimeout); the server keeps
//     only the SHA-256 of session tokens; logout ends the session;
//   - login attempts are throttled per user name and per source address
//     (Throttle: exponential backoff after a few failures), and a locked
//     key is refused without checking the password;
//   - no password, hash or token is written to a page other than its own
//     form's token, or to the log (the log names the user and address).
//
// Time series (the history subpackage) are sampled every second from the
// drives' I/O counters (Cluster.DriveIO) and every minute from the pools'
// usage, and saved in the cluster directory (HistoryFile, 0600) every
// minute and at Close, so a restart keeps the 30 days.
package dashboard
