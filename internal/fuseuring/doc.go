// Package fuseuring serves a FUSE connection over io_uring (FUSE over
// io_uring, Linux 6.14+, protocol 7.42) instead of read and write calls on
// /dev/fuse.
//
// Why: the kernel keeps one request queue per CPU. A request made by a
// process on CPU q is handed to an entry that our thread bound to CPU q
// registered, and the reply wakes the process on that same CPU. Over
// /dev/fuse a request wakes a reader thread wherever it sleeps and its
// reply wakes the caller back, two cross-CPU wake-ups per request; on a
// VM whose idle CPUs halt, each costs a VM exit. Metadata rates through
// the mount rise by half or more (BENCHMARKS.md).
//
// How: after INIT has negotiated fuse.CAP_OVER_IO_URING (the fuse module
// offers it only with its enable_uring parameter set; Enable sets it),
// Start gives every CPU's queue Options.Entries entries, each a header
// buffer and a payload buffer, and one thread bound to that CPU that owns
// the queue's ring. The kernel holds all requests until every queue has
// an entry, then sends them through the rings (FORGET, INTERRUPT and
// notifications stay on /dev/fuse, which go-fuse's ordinary server keeps
// serving). Each request is parsed and answered by go-fuse's
// ProtocolServer over the same file system as that server; Init tells
// the ProtocolServer what INIT negotiated.
//
// Invariants:
//   - Only a queue's own thread submits to its ring. The kernel delivers
//     an entry's next request through task work on the thread that
//     submitted the entry's last command; if that were an arbitrary Go
//     thread, it could be the one blocked on the mount waiting for that
//     very request. Goroutines that answered a request publish the commit
//     and ring the queue's doorbell (an eventfd read pending on the ring).
//   - Requests that may wait long (READ, WRITE, FSYNC, SETLKW, SETATTR,
//     ...; see async) are served on goroutines, so a slow one does not
//     hold up the others of its CPU; the rest, FLUSH and RELEASE included
//     (every close sends them), are served on the queue's thread. Small
//     READs and WRITEs are first tried on the queue's thread with
//     Options.Try, a server whose handlers answer EAGAIN instead of
//     waiting; only those go to goroutines. A request that answered
//     EAGAIN has changed nothing, and its entry is restored byte for byte
//     (the reply header had been written over the request's).
//   - Entry buffers live outside the Go heap (mmap): the kernel writes
//     them while no Go pointer says so.
//   - A reply is written over the request's buffers only after the
//     request was parsed; the payload of anything but WRITE (names, xattr
//     values) is copied out first, because the reply may be written into
//     the same buffer while the handler still reads it.
//
// Limits: INTERRUPT goes to the /dev/fuse server, which does not know the
// requests in flight here, so a signal does not cut a request served over
// io_uring short (it finishes, then the caller sees the signal).
package fuseuring
