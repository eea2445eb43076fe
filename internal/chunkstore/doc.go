// Package chunkstore stores the fragments of erasure-coded stripes on one
// drive. A fragment is an opaque, immutable byte string made by package
// erasure (a 4096-aligned header plus data padded to 4096), named by an
// erasure.FragmentKey. Drive is the small interface shared by the local
// implementation (LocalDrive, a directory), the storage server's RPC client
// and the emulation wrappers Throttle and WithFaults.
//
// # On-disk layout
//
//	<dir>/LOCK                                   flock(2): one process per drive
//	<dir>/frags/<xx>/<ino>.<stripe>.<gen>.<index> one file per fragment
//	<dir>/frags/<xx>/tmp-<name>-<seq>            write in flight
//
// <xx> is two hex digits of a hash of (ino, stripe): 256 fanout
// directories, created by Open, so that no directory holds more than about
// 1/256 of the drive and the stripes of one huge file still spread evenly.
// <ino> and <gen> are lower-case hex, <stripe> and <index> decimal, with no
// leading zeros; names are parsed strictly (round trip), so anything else,
// including a valid name in the wrong fanout directory, is a foreign file:
// logged and ignored, never deleted, never counted.
//
// # Crash semantics
//
// WriteFragment writes a temp file, fdatasyncs it, renames it over the final
// name and fsyncs the fanout directory (group commit per directory: writers
// queued behind a running fsync of the same directory share the next one;
// different directories sync concurrently and the file system journal
// batches them). When it returns nil the fragment is durable, and at any
// crash point the final name holds either nothing or the whole fragment: a
// fragment is never partially visible, on any POSIX file system, without
// relying on the reader's checksums. Open removes leftover temp files and
// recomputes usage by a parallel scan (readdir + stat: about 0.5 s for 100k
// fragments on ext4 here), so there is no usage counter to get out of date.
// DeleteFragment does not fsync the directory: after a crash a deleted
// fragment may come back, whole; garbage collection deletes it again. A
// failed fsync is sticky: every later write fails with ErrFailed (after an
// fsync error the kernel may have dropped dirty state, so a retry could
// falsely report durability). EIO, EROFS and ENXIO are reported as
// ErrFailed too.
//
// Writing in place (final name, no rename) would save only a rename: a new
// file still needs fdatasync and a directory fsync, and it would leave torn
// fragments for the reader's CRCs to catch. Skipping the directory fsync
// (not crash-safe) measured within noise of the shipped scheme (~10%).
//
// # Direct I/O
//
// With Options.DirectIO (see DefaultOptions) fragment data is written with
// O_DIRECT in one pwrite followed by fdatasync, and read with O_DIRECT
// pread, bypassing the page cache, whose fill is slower than the disk.
// Buffers must be Align-aligned in memory: callers should allocate them with
// AlignedBuffer; unaligned ones are copied through a pool of aligned buffers
// (size classes 4 KiB..64 MiB). If the file system refuses O_DIRECT with
// EINVAL (tmpfs before Linux 6.6, some FUSE file systems) the drive falls
// back to buffered I/O for good, logging it once.
//
// # Emulation
//
// Throttle makes a drive behave like a model drive: each read, write or
// delete occupies the drive for max(1/IOPS, Latency + bytes/bandwidth) and
// I/Os are served one at a time, like one disk head, so concurrent requests
// queue. The models (ModelByName):
//
//	name      read MB/s  write MB/s  IOPS   latency  1 MiB write  4 KiB read
//	hdd-7200        190         180    150   6.5 ms      12.3 ms      6.7 ms
//	hdd-10k         230         220    220   4.5 ms       9.3 ms      4.5 ms
//	hdd-15k         260         250    300   3.3 ms       7.5 ms      3.4 ms
//	ssd             550         500  90000    60 µs       2.2 ms       67 µs
//	none    (no throttling)
//
// Latency is the access time (half a rotation plus an effective seek with
// command queueing). SpeedModel.Scale(f) multiplies bandwidths and IOPS by
// f and divides latency by f, so experiments on drives f times smaller keep
// their shape. The serial model understates SSD internal parallelism.
//
// WithFaults injects failures (Fail, Heal), silent bit flips in a seeded
// fraction of reads (CorruptReads) and slowness (SlowDown).
package chunkstore
