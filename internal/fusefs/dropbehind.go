package fusefs

import (
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
)

// Drop-behind: while a file is read sequentially through the page cache,
// the mount asks the kernel to drop the pages the readers have left
// dropBehindKeep behind, dropBehindStep at a time (FUSE_NOTIFY_INVAL_INODE
// of the range).
//
// Those pages would not be used again: every open drops a file's page
// cache anyway (no FOPEN_KEEP_CACHE), and a reader that goes back is
// served by the File's stripe cache or the drives. Keeping them costs a
// fresh page for every byte read: a sequential read of 8 GiB fills 8 GiB
// of page cache. Dropped pages return to the allocator while they are
// still warm and the next readahead reuses them. On virtual machines that
// hand freed memory back to their host (free page reporting), fresh pages
// cost a host fault each, so reusing warm pages saves a fault per page of a
// sequential read.
//
// Only reads that stay within [dropped, end+dropBehindKeep] count as
// sequential; the first read outside (a reader going back before the
// dropped mark, or jumping far ahead) stops drop-behind for the file until
// its last handle in this mount is released.
const (
	dropBehindKeep = 64 << 20
	dropBehindStep = 32 << 20
)

// dropBehind is the read state of one open file; guarded by its mutex.
type dropBehind struct {
	mu      sync.Mutex
	end     int64 // furthest byte read so far
	dropped int64 // pages before this offset were dropped (or asked to be)
	off     bool  // not sequential: never drop again
	busy    bool  // a notification is being sent
}

// read records a read of n bytes at off, and if the readers have moved far
// enough, asks the kernel (in the background: the notification waits for
// pages locked by reads in progress) to drop the pages behind them.
func (d *dropBehind) read(in *fs.Inode, off int64, n int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.off {
		return
	}
	if off < d.dropped || off > d.end+dropBehindKeep {
		d.off = true
		return
	}
	d.end = max(d.end, off+int64(n))
	to := d.end - dropBehindKeep
	if d.busy || to < d.dropped+dropBehindStep {
		return
	}
	from := d.dropped
	d.dropped, d.busy = to, true
	go func() {
		errno := in.NotifyContent(from, to-from)
		d.mu.Lock()
		d.busy = false
		if errno != 0 && errno != syscall.ENOENT {
			d.off = true // the kernel cannot: stop asking
		}
		d.mu.Unlock()
	}()
}
