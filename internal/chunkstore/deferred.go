package chunkstore

import (
	"context"
	"sync/atomic"
)

// Deferred writes.
//
// A write whose context carries Deferred is a deferred write: the drive
// makes the fragment visible (ReadFragment, ListFragments and Stat see it
// when WriteFragment returns) and atomic as always, but not durable: it
// skips the fdatasync (segments) or the fdatasync and directory fsync
// (files) that an ordinary write waits for. Drive.Sync makes every
// deferred write that returned before the call durable, with one sync per
// segment with deferred records (segments format) or one syncfs of the
// host file system (files format), however many fragments there are: that
// is the group commit of many small files' fragments. A deferred write of
// at most maxCachedFragment bytes goes through the page cache even with
// Options.DirectIO (an O_DIRECT write waits for the device, which costs
// more than the rest of a small write), and a segment record so written
// is read back through it while the drive stays open; larger ones keep
// O_DIRECT, whose streams the page cache would slow down.
//
// What a crash can do to a deferred write that no Sync covered:
//
//   - The process is killed (kill -9, an OOM kill, a panic): nothing. The
//     bytes were handed to the kernel before WriteFragment returned, so
//     the fragment is there whole when the drive opens again.
//   - The machine loses power or the kernel crashes: the fragment may be
//     gone. It is never seen half written as a fragment: a segment record
//     counts after a crash only if the CRCs of its header and its data
//     check (a torn or zeroed record is skipped by Open's scan), and a
//     files-format fragment that the host file system tore or zeroed fails
//     the per-block CRC32C of its blocks on every read (package erasure),
//     which readers report and repair from the stripe's other fragments.
//
// A failed Sync is sticky, like a failed fdatasync of an ordinary write:
// the kernel may have dropped the dirty state it was to write, so the
// drive fails every later write and Sync with ErrFailed.
type deferredKey struct{}

// Deferred returns a context whose fragment writes are deferred (see
// above): durable at the drive's next Sync rather than at return. Remote
// drives carry the mark to the storage server.
func Deferred(ctx context.Context) context.Context {
	return context.WithValue(ctx, deferredKey{}, true)
}

// IsDeferred reports whether ctx marks its writes deferred.
func IsDeferred(ctx context.Context) bool {
	v, _ := ctx.Value(deferredKey{}).(bool)
	return v
}

// deferredWrites counts the deferred writes of a drive (or of one
// segment) and those a finished sync covers, so that Sync costs nothing
// when nothing is waiting and shares one sync among concurrent callers.
type deferredWrites struct {
	written atomic.Uint64 // deferred writes that returned
	synced  atomic.Uint64 // of those, the ones a finished sync covered
	group   syncGroup
}

// wrote counts a deferred write, after its bytes reached the kernel and
// before it returns.
func (w *deferredWrites) wrote() { w.written.Add(1) }

// pending reports whether a deferred write awaits a sync.
func (w *deferredWrites) pending() bool { return w.synced.Load() < w.written.Load() }

// sync returns once every deferred write counted before the call is
// durable: at once if a finished sync covered them, else after a sync (or
// a concurrent caller's) that started after the call. A sync counts the
// writes that returned before it started, which are all it can cover.
// Its first error is sticky (syncGroup).
func (w *deferredWrites) sync(fn func() error) error {
	if !w.pending() {
		return nil
	}
	return w.group.commit(func() error {
		n := w.written.Load()
		if err := fn(); err != nil {
			return err
		}
		for {
			s := w.synced.Load()
			if s >= n || w.synced.CompareAndSwap(s, n) {
				return nil
			}
		}
	})
}
