package chunkstore

// InProcess is the optional capability of a Drive whose calls are served
// in the caller's process, without a network round trip (a drive of this
// process's storage server). Stripe writers write small fragments to such
// a drive in the calling goroutine: the write then costs a system call,
// where handing it to a goroutine and waiting for it costs more, above
// all on a FUSE queue's locked thread, which gives its CPU away while it
// waits. Wrappers of drives forward it (their InProcess is their inner
// drive's); each implementation pins it with a compile-time check.
type InProcess interface {
	// InProcess reports whether calls are served in process.
	InProcess() bool
}

// IsInProcess reports whether d declares itself served in process.
func IsInProcess(d any) bool {
	p, ok := d.(InProcess)
	return ok && p.InProcess()
}
